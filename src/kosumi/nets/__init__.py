"""Networks: what a net is (``config.NetConfig``), what it sees (``features``), the PyTorch
module (``resnet.KosumiNet``) and kosumi checkpoints (``checkpoint``).

``config``, ``features`` and ``checkpoint`` (reading/writing) need only numpy; ``resnet`` and
``checkpoint.build_net``/``load_net`` import torch. Nothing is imported here, so that
``import kosumi.nets`` stays light.
"""
