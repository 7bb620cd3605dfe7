"""offloaddoctor: diagnose Megatron CPU-offloading and GPU-memory failures from logs and configs."""

__version__ = "0.1.0"
