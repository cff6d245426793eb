"""Attention scoring functions: one registry, one signature.

A score turns per-head queries and keys into *unscaled* compatibilities::

    keys   = score.prepare_keys(k)     # (B, H, Tk, d_k) -> (B, H, Tk, d')   once per sequence
    scores = score(q, keys)            # (B, H, Tq, d_k) x keys -> (B, H, Tq, Tk)

``prepare_keys`` acts on each key position independently, so prepared keys of new decoder
positions can be appended to a cache along dim 2. Scaling, masking and softmax belong to
:class:`ablate.model.attention.MultiHeadAttention`, so score x scaling is a clean grid. Each score
declares the scaling its paper uses (:attr:`Score.paper_scale`), which ``model.attention.scale=auto``
(the default) applies.

A score that equals a dot product ``q' . k'`` plus a per-key bias also says so through
:meth:`Score.as_dot`, letting the attention module run the fused
``scaled_dot_product_attention`` kernel instead of materialising the scores.

Adding a variant is one class with ``@register("score", "<name>")`` (it lands in :data:`SCORES`),
here or in a plugin (``docs/extending.md``). Keyword-only constructor parameters are the score's
hyperparameters, set by ``model.attention.params.<name>``.
"""

from __future__ import annotations

import math
from typing import Optional

import torch
from torch import Tensor, nn

from ablate.config import AttentionConfig
from ablate.errors import AblateError
from ablate.registry import register, table


class ScoreError(AblateError):
    """An unknown or unusable attention score name."""


SCORES: dict[str, type[Score]] = table("score")
"""Name -> score class, filled by ``@register("score", name)`` (ours below, and plugins')."""


def _per_head_matrix(heads: int, rows: int, cols: int) -> nn.Parameter:
    """A (heads, rows, cols) parameter, each head Xavier-uniform initialised."""
    bound = math.sqrt(6.0 / (rows + cols))
    return nn.Parameter(torch.empty(heads, rows, cols).uniform_(-bound, bound))


class Score(nn.Module):
    """Base class. Subclasses implement :meth:`forward`; the hooks default to a plain key.

    Args:
        d_k: Per-head query/key size.
        heads: Number of heads (each head has its own parameters, if any).
        cfg: The attention section of the model config.
    """

    paper_scale: bool = True
    """The scaling of the score's paper, used by ``scale=auto``: True for 1/sqrt(d_k), False for none."""

    def __init__(self, d_k: int, heads: int, cfg: AttentionConfig):
        super().__init__()
        self.d_k, self.heads = d_k, heads

    def prepare_keys(self, k: Tensor) -> Tensor:
        """Per-position key transform, computed once per sequence.

        Args:
            k: Projected keys, (B, H, Tk, d_k).

        Returns:
            Prepared keys, (B, H, Tk, d') -- what :meth:`forward` and caches receive.
        """
        return k

    def forward(self, q: Tensor, keys: Tensor) -> Tensor:
        """Unscaled scores.

        Args:
            q: Projected queries, (B, H, Tq, d_k).
            keys: Output of :meth:`prepare_keys`, (B, H, Tk, d').

        Returns:
            Scores, (B, H, Tq, Tk).
        """
        raise NotImplementedError

    def as_dot(self, q: Tensor, keys: Tensor) -> Optional[tuple[Tensor, Tensor, Optional[Tensor]]]:
        """``(q', k', b)`` with ``score(q, keys) == q' k'^T + b`` up to a per-query constant.

        A per-query constant cancels in the softmax. ``b`` is an unscaled per-key bias of shape
        (B, H, 1, Tk) or None. Returns None when the score has no such form (slow path).
        """
        return None


@register("score", "dot")
class DotScore(Score):
    """Dot product ``q . k`` (Luong et al. 2015, eq. 8 "dot"; Vaswani et al. 2017, eq. 1).

    Scaled by 1/sqrt(d_k) by default: the variance of ``q . k`` grows with d_k (Vaswani et al. 2017,
    sec. 3.2.1 and footnote 4).
    """

    def forward(self, q: Tensor, keys: Tensor) -> Tensor:
        return q @ keys.transpose(-1, -2)

    def as_dot(self, q, keys):
        return q, keys, None


BACKWARD_BUFFERS = 2
"""Chunk-sized buffers alive at the peak of one additive chunk's backward pass (measured: peak RSS of
the memory section of ``ablate bench`` in training mode is about twice the chunk); the chunk budget covers them together."""


class _ChunkedAdditive(torch.autograd.Function):
    """``v^T tanh(qp_i + k_j)`` over chunks of ``chunk`` queries, keeping no (B, H, c, Tk, A) intermediate for
    the backward pass: it recomputes each chunk's tanh there and turns it into the chunk's gradient in place, so
    forward and backward each hold one chunk's buffer at a time (the gradients are those of the plain
    computation: d/dv = sum g h, d/d(qp + k) = g v (1 - h^2) summed over keys, resp. queries).
    """

    @staticmethod
    def forward(ctx, qp: Tensor, keys: Tensor, v: Tensor, chunk: int) -> Tensor:  # type: ignore[override]
        ctx.save_for_backward(qp, keys, v)
        ctx.chunk = chunk
        return torch.cat([AdditiveScore._chunk(part, keys, v) for part in qp.split(chunk, dim=2)], dim=2)

    @staticmethod
    @torch.autograd.function.once_differentiable
    def backward(ctx, grad: Tensor):  # type: ignore[override]
        qp, keys, v = ctx.saved_tensors  # (B, H, Tq, A), (B, H, Tk, A), (1, H, 1, A, 1)
        d_qp, d_keys, d_v = torch.empty_like(qp), torch.zeros_like(keys), torch.zeros_like(v)
        v_row = v.transpose(-1, -2)  # (1, H, 1, 1, A)
        for start in range(0, qp.size(2), ctx.chunk):
            part, g = qp[:, :, start : start + ctx.chunk], grad[:, :, start : start + ctx.chunk, :, None]
            h = (part[:, :, :, None, :] + keys[:, :, None, :, :]).tanh_()  # (B, H, c, Tk, A)
            d_v += (g.transpose(-1, -2) @ h).sum((0, 2)).view_as(v)  # sum over B, c, Tk of g h: (1, H, 1, A, 1)
            h.square_().neg_().add_(1).mul_(g).mul_(v_row)  # in place: g v (1 - h^2), the sum's gradient
            d_qp[:, :, start : start + ctx.chunk] = h.sum(3)
            d_keys += h.sum(2)
        return d_qp, d_keys, d_v, None


@register("score", "additive")
class AdditiveScore(Score):
    """Additive (concat) score ``v^T tanh(W_q q + W_k k)`` per head (Bahdanau et al. 2015, eq. 6 / A.1.2).

    The hidden size of the tanh layer is d_k. ``W_k k`` is precomputed by ``prepare_keys``.
    The (B, H, Tq, Tk, d_k) intermediate is built for a chunk of queries at a time so that one
    chunk stays within ``chunk_mb`` megabytes (in training, the :data:`BACKWARD_BUFFERS` a chunk's
    backward holds together). In training the tanh outputs are not kept for the
    backward pass but recomputed there one chunk at a time (:class:`_ChunkedAdditive`), so training
    too holds one chunk's intermediate, not all of them (the loss and gradients are those of the
    unchunked computation).

    Unscaled by default, as in the paper: each ``v_a tanh(.)`` term is bounded by |v_a| and ``v`` is
    initialised U(-1/sqrt(d_k), 1/sqrt(d_k)), so the score does not grow with d_k and there is
    nothing for 1/sqrt(d_k) to correct.

    Args:
        chunk_mb: memory budget in megabytes of one query chunk of the (B, H, Tq, Tk, d_k) tensor
            (``model.attention.params.chunk_mb``, positive); it changes memory, not the scores.
    """

    paper_scale = False

    def __init__(self, d_k: int, heads: int, cfg: AttentionConfig, *, chunk_mb: float = 64.0):
        super().__init__(d_k, heads, cfg)
        if not chunk_mb > 0:
            raise ScoreError(
                f"model.attention.params.chunk_mb={chunk_mb} must be positive (megabytes of one query chunk)"
            )
        self.w_q = _per_head_matrix(heads, d_k, d_k)  # (H, d_k in, d_a)
        self.w_k = _per_head_matrix(heads, d_k, d_k)
        self.v = nn.Parameter(torch.empty(heads, d_k).uniform_(-1 / math.sqrt(d_k), 1 / math.sqrt(d_k)))
        self.chunk_bytes = chunk_mb * 2**20

    def prepare_keys(self, k: Tensor) -> Tensor:
        return k @ self.w_k  # (B, H, Tk, d_a)

    def forward(self, q: Tensor, keys: Tensor) -> Tensor:
        qp = q @ self.w_q  # (B, H, Tq, d_a)
        B, H, Tq, A = qp.shape
        Tk = keys.size(2)
        v = self.v.to(qp.dtype).view(1, H, 1, A, 1)
        grads = torch.is_grad_enabled() and any(t.requires_grad for t in (qp, keys, v))
        per_query = B * H * Tk * A * max(qp.element_size(), keys.element_size())  # one (B, H, 1, Tk, A) slice
        chunk = max(1, int(self.chunk_bytes // (per_query * (BACKWARD_BUFFERS if grads else 1))))
        if chunk >= Tq:
            return self._chunk(qp, keys, v)
        if grads:
            return _ChunkedAdditive.apply(qp, keys, v, chunk)  # recomputes each chunk in the backward pass
        return torch.cat([self._chunk(part, keys, v) for part in qp.split(chunk, dim=2)], dim=2)

    @staticmethod
    def _chunk(qp: Tensor, keys: Tensor, v: Tensor) -> Tensor:
        """Scores (B, H, c, Tk) of a chunk of c queries; the (B, H, c, Tk, A) buffer dies on return.

        ``tanh_`` works in place on the fresh sum (autograd keeps only its output), so a chunk
        costs one buffer, not two.
        """
        hidden = (qp[:, :, :, None, :] + keys[:, :, None, :, :]).tanh_()  # (B, H, c, Tk, A)
        return (hidden @ v).squeeze(-1)


@register("score", "general")
class GeneralScore(DotScore):
    """Bilinear ``q^T W k`` with one d_k x d_k matrix per head (Luong et al. 2015, eq. 8 "general").

    ``prepare_keys`` computes ``W k`` once, so the score is the :class:`DotScore` of ``q`` and ``W k``: a single
    matrix product that also runs on the fused kernel, scaled by 1/sqrt(d_k) by default (Luong et al. 2015
    predate the scale; their d was fixed).
    """

    def __init__(self, d_k: int, heads: int, cfg: AttentionConfig):
        super().__init__(d_k, heads, cfg)
        self.weight = _per_head_matrix(heads, d_k, d_k)  # (H, d_k out, d_k in)

    def prepare_keys(self, k: Tensor) -> Tensor:
        # (B, H, Tk, d_k) @ (H, d_k in, d_k out) -> (B, H, Tk, d_k): row t is W_h k_t
        return k @ self.weight.transpose(-1, -2)


@register("score", "gaussian")
class GaussianScore(Score):
    """Gaussian kernel ``-||q - k||^2 / 2`` (Nadaraya-Watson attention pooling; Zhang et al.,
    *Dive into Deep Learning*, sec. 11.2, eq. 11.2.6).

    With ``bandwidth`` (``model.attention.params.bandwidth=true``) each head learns a bandwidth ``w`` and the score is
    ``-(w ||q - k||)^2 / 2`` (parametric attention pooling, d2l eq. 11.2.7). Computed by matrix
    products, ``-(||q||^2 + ||k||^2 - 2 q.k) / 2``; the ``||q||^2`` term is constant per query,
    so :meth:`as_dot` hands the fused kernel ``q.k`` plus a per-key bias ``-||k||^2 / 2``.

    Scaled by 1/sqrt(d_k) by default: ``||q - k||^2`` is a sum over d_k dimensions, so it grows with
    d_k as the dot product does (d2l's pooling works on scalars, d = 1), and the RBF-kernel attention
    of Tsai et al. (2019, "Transformer Dissection", sec. 3) divides the squared distance by sqrt(d_k)
    for that reason.

    Args:
        bandwidth: learn a per-head bandwidth ``w``, initialised to 1 (false: ``w = 1``, fixed).
    """

    def __init__(self, d_k: int, heads: int, cfg: AttentionConfig, *, bandwidth: bool = False):
        super().__init__(d_k, heads, cfg)
        self.bandwidth = nn.Parameter(torch.ones(heads)) if bandwidth else None

    def _widen(self, x: Tensor) -> Tensor:
        if self.bandwidth is None:
            return x
        return x * self.bandwidth.to(x.dtype).view(1, -1, 1, 1)

    def prepare_keys(self, k: Tensor) -> Tensor:
        return self._widen(k)

    def forward(self, q: Tensor, keys: Tensor) -> Tensor:
        q = self._widen(q)
        q2 = q.pow(2).sum(-1, keepdim=True)  # (B, H, Tq, 1)
        k2 = keys.pow(2).sum(-1).unsqueeze(-2)  # (B, H, 1, Tk)
        return q @ keys.transpose(-1, -2) - 0.5 * (q2 + k2)

    def as_dot(self, q, keys):
        return self._widen(q), keys, -0.5 * keys.pow(2).sum(-1).unsqueeze(-2)


def build_score(name: str, d_k: int, heads: int, cfg: AttentionConfig) -> Score:
    """Instantiate ``SCORES[name]``; an unknown name raises a one-line :class:`ScoreError`.

    ``cfg.params`` (``model.attention.params``, checked against the class when the config was
    validated) are keyword arguments of ``cfg.score``'s constructor; another score (a different
    ``cross_score``) is built with its defaults.
    """
    if name not in SCORES:
        raise ScoreError(f"attention score '{name}' is not available for this model; choose from: {', '.join(SCORES)}")
    params = cfg.params if name == cfg.score else {}
    return SCORES[name](d_k, heads, cfg, **params)
