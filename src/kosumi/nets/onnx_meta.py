"""The metadata keys of a kosumi ONNX file (``nets.onnx`` writes them, ``nets.onnx_weights``
and the ONNX Runtime backend read them)."""

META_FORMAT, META_CONFIG, META_PRECISION = "kosumi_format", "kosumi_config", "kosumi_precision"
META_EXPORTER, META_SOURCE = "kosumi_exporter", "kosumi_source_sha256"
META_INT8_WEIGHTS = "kosumi_int8_weights"  # the form (nets.onnx_weights); absent: int8
