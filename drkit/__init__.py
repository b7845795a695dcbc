"""drkit: DrKIT (Dhingra et al., ICLR 2020), differentiable reasoning over a virtual knowledge base.

    from drkit import DrKIT
    kit = DrKIT.load("runs/index", "runs/model-2hop")      # a multi-hop model, or a hop-mixing run
    result = kit.answer("who directed the films written by [Irwin Allen]")
    passages = kit.retrieve("who directed the films written by [Irwin Allen]", k=5)

The package is laid out by pipeline stage (ARCHITECTURE.md): data -> index -> dense -> reason -> qa.
"""

__version__ = "0.1.0"

__all__ = ["DrKIT", "LoadConfig", "Passage", "QueryConfig", "ReadConfig", "Result", "__version__"]


def __getattr__(name):  # the front door is imported on first use: `import drkit` stays light
    if name in ("DrKIT", "LoadConfig", "QueryConfig"):
        from drkit.qa import pipeline

        return getattr(pipeline, name)
    if name == "ReadConfig":
        from drkit.reader.reading import ReadConfig

        return ReadConfig
    if name in ("Passage", "Result"):
        from drkit.qa import results

        return getattr(results, name)
    raise AttributeError(f"module 'drkit' has no attribute {name!r}")
