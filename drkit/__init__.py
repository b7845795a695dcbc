"""drkit: DrKIT (Dhingra et al., ICLR 2020), differentiable reasoning over a virtual knowledge base."""

__version__ = "0.1.0"
