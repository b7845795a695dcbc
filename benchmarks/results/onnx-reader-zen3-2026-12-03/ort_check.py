import time, torch, numpy as np
torch.set_num_threads(2)
from drkit.reader.model import Reader
r = Reader.load('runs/2wiki-f0-zen3/train-reader/reader')
t = r.transformer.eval()
L=int(__import__('sys').argv[1]) if len(__import__('sys').argv)>1 else 480
ids = torch.randint(1000, 20000, (1, L)); mask = torch.ones(1, L, dtype=torch.long)
def bench(f, n=10):
    f(); f()
    ts=[]
    for _ in range(n):
        a=time.perf_counter(); f(); ts.append(time.perf_counter()-a)
    return sorted(ts)[n//2]
with torch.inference_mode():
    tt = bench(lambda: t(input_ids=ids, attention_mask=mask).last_hidden_state)
    ref = t(input_ids=ids, attention_mask=mask).last_hidden_state.numpy()
print('torch', tt*1000, 'ms')
class W(torch.nn.Module):
    def __init__(s, t): super().__init__(); s.t=t
    def forward(s, ids, mask): return s.t(input_ids=ids, attention_mask=mask).last_hidden_state
import os
if not os.path.exists('/tmp/reader.onnx'):
    torch.onnx.export(W(t), (ids, mask), '/tmp/reader.onnx', input_names=['ids','mask'], output_names=['h'],
                  dynamic_axes={'ids':{0:'b',1:'l'},'mask':{0:'b',1:'l'},'h':{0:'b',1:'l'}}, opset_version=17, dynamo=False)
import onnxruntime as ort
so = ort.SessionOptions(); so.intra_op_num_threads=2; so.inter_op_num_threads=1
so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
s = ort.InferenceSession('/tmp/reader.onnx', so, providers=['CPUExecutionProvider'])
feed={'ids':ids.numpy(),'mask':mask.numpy()}
to = bench(lambda: s.run(None, feed))
out = s.run(None, feed)[0]
print('ort', to*1000, 'ms', 'maxdiff', np.abs(out-ref).max())
