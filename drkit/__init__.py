"""drkit: DrKIT (Dhingra et al., ICLR 2020), differentiable reasoning over a virtual knowledge base.

    from drkit import DrKIT
    kit = DrKIT.load("runs/index", "runs/model-2hop")
    result = kit.answer("who directed the films written by [Irwin Allen]")

The package is laid out by pipeline stage (ARCHITECTURE.md): data -> index -> dense -> reason -> qa.
"""

__version__ = "0.1.0"

__all__ = ["DrKIT", "QueryConfig", "__version__"]


def __getattr__(name):  # the front door is imported on first use: `import drkit` stays light
    if name in ("DrKIT", "QueryConfig"):
        from drkit.qa import pipeline

        return getattr(pipeline, name)
    raise AttributeError(f"module 'drkit' has no attribute {name!r}")
