"""A writer of small random KataGo model files of any model version 8 to 17, laid out as KataGo's
own exporter lays them out (facts from KataGo's ``cpp/neuralnet/desc.cpp``, the format's
specification), for the reader's tests and for the real KataGo engine to evaluate as an oracle.

``KataGoWriter(binary, seed).model(version=..., blocks=[...])`` returns the decompressed bytes.
A block is ``"ordinary"``, ``"gpool"``, ``("nested", inner_channels, [blocks...])``,
``("attention", heads, kv_heads, q_dim, v_dim, rope)`` (rope: "learned", "fixed" or "none") or
``("ffn", hidden, gated)``.
"""

from __future__ import annotations

import io
from typing import Any

import numpy as np

ACT_TOKEN = {"relu": "ACTIVATION_RELU", "silu": "ACTIVATION_SILU", "mish": "ACTIVATION_MISH",
             "identity": "ACTIVATION_IDENTITY"}
MODERN = [("nested", 6, [("attention", 2, 1, 4, 3, "learned"), ("ffn", 10, True)]),
          ("nested", 6, ["ordinary", "gpool", ("attention", 2, 2, 4, 4, "fixed")]),
          "gpool", ("attention", 4, 2, 2, 2, "none"), ("ffn", 12, True)]


class KataGoWriter:
    """Writes a random KataGo model (binary or text float blocks)."""

    def __init__(self, binary: bool = True, seed: int = 0, scale: float = 0.3):
        self.binary = binary
        self.rng = np.random.default_rng(seed)
        self.scale = scale
        self.out = io.BytesIO()
        self.version = 8
        self.activation = "relu"

    def tok(self, *items: Any) -> None:
        self.out.write(("\n".join(str(i) for i in items) + "\n").encode())

    def floats(self, values: np.ndarray) -> None:
        values = np.asarray(values, dtype="<f4").ravel()
        if self.binary:
            self.out.write(b"@BIN@" + values.tobytes() + b"\n")
        else:
            self.out.write((" ".join(repr(float(x)) for x in values) + "\n").encode())

    def normal(self, *shape: int, scale: float | None = None) -> np.ndarray:
        return self.rng.normal(0, self.scale if scale is None else scale, shape)

    def conv(self, name: str, k: int, ic: int, oc: int) -> None:
        self.tok(name, k, k, ic, oc, 1, 1)
        self.floats(self.normal(k, k, ic, oc, scale=self.scale / np.sqrt(max(1, k * k * ic / 8))))

    def bn(self, name: str, c: int, scale: bool = True) -> None:
        self.tok(name, c, 1e-20 if self.version < 15 else 1e-5, int(scale), 1)
        self.floats(self.normal(c, scale=0.05))
        self.floats(self.rng.uniform(0.5, 1.5, c))
        if scale:
            self.floats(self.rng.uniform(0.5, 1.5, c))
        self.floats(self.normal(c, scale=0.1))

    def act(self, name: str) -> None:
        if self.version >= 11:
            self.tok(name, ACT_TOKEN[self.activation])
        else:
            self.tok(name)

    def matmul(self, name: str, ic: int, oc: int, scale: float | None = None) -> None:
        self.tok(name, ic, oc)
        s = self.scale / np.sqrt(max(1, ic / 8)) if scale is None else scale
        self.floats(self.normal(ic, oc, scale=s))

    def bias(self, name: str, c: int) -> None:
        self.tok(name, c)
        self.floats(self.normal(c, scale=0.1))

    def token_norm(self, name: str, c: int) -> None:
        self.tok(name, c, 1e-6)
        self.floats(self.rng.uniform(0.5, 1.5, c))

    # ------------------------------------------------------------------ blocks
    def block(self, b: Any, c: int, name: str, widths: tuple[int, int, int] | None) -> None:
        mid, regular, gpool = widths or (c, max(1, c - 2), 2)
        if b == "ordinary":
            self.tok("ordinary_block", name)
            self.bn(f"{name}/norm1", c)
            self.act(f"{name}/actv1")
            self.conv(f"{name}/w1", 3, c, mid)
            self.bn(f"{name}/norm2", mid)
            self.act(f"{name}/actv2")
            self.conv(f"{name}/w2", 3, mid, c)
        elif b == "gpool":
            self.tok("gpool_block", name)
            self.bn(f"{name}/norm1", c)
            self.act(f"{name}/actv1")
            self.conv(f"{name}/w1a", 3, c, regular)
            self.conv(f"{name}/w1b", 3, c, gpool)
            self.bn(f"{name}/norm1b", gpool)
            self.act(f"{name}/actv1b")
            self.matmul(f"{name}/w1r", 3 * gpool, regular)
            self.bn(f"{name}/norm2", regular)
            self.act(f"{name}/actv2")
            self.conv(f"{name}/w2", 3, regular, c)
        elif b[0] == "nested":
            _, inner, blocks = b
            self.tok("nested_bottleneck_block", name, len(blocks))
            self.bn(f"{name}.normactconvp.norm", c)
            self.act(f"{name}.normactconvp.act")
            self.conv(f"{name}.normactconvp.conv", 1, c, inner)
            for j, x in enumerate(blocks):
                self.block(x, inner, f"{name}.blockstack.{j}", None)
            self.bn(f"{name}.normactconvq.norm", inner)
            self.act(f"{name}.normactconvq.act")
            self.conv(f"{name}.normactconvq.conv", 1, inner, c)
        elif b[0] == "attention":
            _, h, kv, qd, vd, rope = b
            self.tok("transformer_attention_block", name, h, kv, qd, vd, int(rope != "none"),
                     int(rope == "learned"))
            self.token_norm(f"{name}.norm1", c)
            self.matmul(f"{name}.q_proj", c, h * qd)
            self.matmul(f"{name}.k_proj", c, kv * qd)
            self.matmul(f"{name}.v_proj", c, kv * vd)
            self.matmul(f"{name}.out_proj", h * vd, c)
            if rope == "learned":
                self.tok(f"{name}.rope_freqs", kv, qd // 2, 2)
                self.floats(self.rng.uniform(-1.5, 1.5, (kv, qd // 2, 2)))
            elif rope == "fixed":
                self.tok(f"{name}.rope_theta", 100.0)
        else:
            _, hidden, gated = b
            self.tok("transformer_ffn_block", name, c, hidden, int(gated))
            self.token_norm(f"{name}.norm", c)
            self.matmul(f"{name}.ffn_linear1", c, hidden)
            if gated:
                self.matmul(f"{name}.ffn_linear_gate", c, hidden)
            self.matmul(f"{name}.ffn_linear2", hidden, c)

    # ------------------------------------------------------------------ the model
    def model(self, version: int = 8, c: int = 8, blocks: Any = ("ordinary", "gpool"),
              activation: str | None = None, rms_tip: bool | None = None,
              policy_out: int | None = None, name: str = "tiny-test-net",
              post: tuple[float, ...] = (20.0, 20.0, 20.0, 20.0, 40.0, 0.25, 150.0)) -> bytes:
        self.version = version
        self.activation = activation or ("relu" if version < 11 else "silu")
        modern = version >= 15
        rms_tip = modern if rms_tip is None else rms_tip
        if policy_out is None:
            policy_out = 4 if version == 16 else 2 if version >= 12 else 1
        self.tok(name, version, 22, 19)
        if version >= 13:
            self.tok(*post)
        if modern:
            self.tok(0, 0, 0, 0, 0, 0, 0, 0)
        # mid = regular + dilated, as KataGo's trainer writes them: ordinary blocks output c,
        # gpool blocks c - 2 regular and 4 gpool channels
        self.tok("trunk", len(blocks), c, c, c - 2, 2, 4)
        if modern:
            self.tok(int(rms_tip), 0, 0, 0, 0, 0)
        self.conv("conv1", 5, 22, c)
        self.matmul("ginputs", 19, c)
        for i, b in enumerate(blocks):
            self.block(b, c, f"rconv{i + 1}", (c, c - 2, 4))
        if rms_tip:
            self.tok("trunk/norm", c, 1e-6, 1, 0)
            self.floats(self.rng.uniform(0.5, 1.5, c))
            self.floats(self.normal(c, scale=0.1))
        else:
            self.bn("trunk/norm", c)
        self.act("trunk/actv")
        self.tok("policyhead")
        if version >= 17:
            self.tok(policy_out, 0, 0, 0)
        self.conv("p1/intermediate_conv", 1, c, 4)
        self.conv("g1", 1, c, 4)
        self.bn("g1/norm", 4)
        self.act("g1/actv")
        self.matmul("matmulg2w", 12, 4)
        self.bn("p1/norm", 4)
        self.act("p1/actv")
        self.conv("p2", 1, 4, policy_out)
        if modern:
            self.matmul("matmulpass", 12, 4)
            self.bias("matmulpass/b", 4)
            self.act("pass/actv")
            self.matmul("matmulpass2", 4, policy_out, scale=0.1)
        else:
            self.matmul("matmulpass", 12, policy_out, scale=0.1)
        self.tok("valuehead")
        if version >= 17:
            self.tok(0, 0, 0)
        self.conv("v1", 1, c, 4)
        self.bn("v1/norm", 4)
        self.act("v1/actv")
        self.matmul("v2/w", 12, 5)
        self.bias("v2/b", 5)
        self.act("v2/actv")
        self.matmul("v3/w", 5, 3)
        self.bias("v3/b", 3)
        n_score = 6 if version >= 9 else 4
        self.matmul("sv3/w", 5, n_score)
        self.bias("sv3/b", n_score)
        self.conv("vownership", 1, 4, 1)
        return self.out.getvalue()
