"""Writing packs (kosumi.export.pack): what a deployed net's config keeps, and packs that the
reader (kosumi.nets.pack, a separate module) gives back bit for bit.

Oracles: the config fields the module documents as dropped, removed here by hand; the pack
reader's tensors compared with the checkpoint's; the summary's numbers against zstd and the
file written.
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from kosumi.export.compressibility import compress
from kosumi.export.pack import deploy_config, pack_checkpoint, write_pack_model
from kosumi.nets.checkpoint import read_checkpoint
from kosumi.nets.pack import read_pack_model


def test_deploy_config_drops_only_the_report_and_training_tables(random_net, int8_net_b2c16):
    ck = read_checkpoint(random_net)
    cfg = replace(ck.config, provenance={"teacher": "t", "metrics": [1, 2], "settings": {"a": 1},
                                         "data": {"path": "runs/labels"}})
    assert deploy_config(cfg).provenance == {"teacher": "t", "data": {"path": "runs/labels"}}
    assert deploy_config(cfg).quantization == cfg.quantization
    q = read_checkpoint(int8_net_b2c16).config
    info = q.quantization["info"]
    assert "sensitivity" in info  # kosumi quantize records it ...
    kept = deploy_config(q).quantization["info"]
    assert kept == {k: v for k, v in info.items()
                    if k not in ("sensitivity", "agreement_on_calibration")}  # ... a pack not
    assert deploy_config(q).quantization["bits"] == 8


def test_packs_read_back_bit_for_bit(tmp_path, random_net, int8_net_b2c16):
    for net in (random_net, int8_net_b2c16):
        ck = read_checkpoint(net)
        data, info = pack_checkpoint(ck)
        naive = compress(b"".join(np.ascontiguousarray(t).tobytes()
                                  for t in ck.tensors.values()), "zstd-19")
        assert info["naive_bytes"] == len(naive) and sum(info["chosen"].values()) == len(
            ck.tensors)
        out = tmp_path / f"{net.stem}.kpk"
        line = write_pack_model(ck, out)
        assert out.read_bytes() == data and f"{len(data):,} bytes" in line
        back = read_pack_model(out)
        assert set(back.tensors) == set(ck.tensors)
        for name, t in ck.tensors.items():
            assert back.tensors[name].dtype == t.dtype, name
            np.testing.assert_array_equal(back.tensors[name], t, err_msg=name)
        assert back.config.arch == ck.config.arch
        assert back.config.quantized == ck.config.quantized
