"""kosumi: distill large Go networks into tiny, fast, quantized ones and play with them anywhere."""

__version__ = "0.1.0"
