"""The reader: answers read from the retrieved passages (the paper's DrKIT + BERT, section 3.3 and its
appendix "HotpotQA answer extraction").

A transformer reads the question and the top-N passages (each with its title, a marker token before each
passage and before each sentence) and predicts, from the first token, whether the answer is a span, "yes"
or "no"; start and end logits of the span; and, from each sentence marker, whether the sentence supports
the answer. A which-of-two question about dates ("Who was born first, A or B?") or a same-country question
is settled by reading each option's date or country in the passages and comparing them, where they give
both (`drkit.reader.compare`, `drkit.reader.same`).
`drkit.reader.model` is the model, `drkit.reader.examples` builds its training examples by
distant supervision, `drkit.reader.train` trains it (``drkit train-reader``), and `drkit.reader.text` holds
the answer normalisation and EM/F1 of HotpotQA's official evaluation. Above it, the front door
(`drkit.qa.pipeline.DrKIT`, ``reader=``) reads each answered question's top passages, and `drkit.qa.answer`
runs retrieval then reading over a question file and scores it (``drkit answer``).
"""
