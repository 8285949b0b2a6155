defmodule Emily.QuantizedWeight do
  @moduledoc """
  A quantized weight matrix: packed codes with their per-group scales and
  biases, and the static parameters that say how to read them.

  In the `"affine"` mode (MLX's format, bit-compatible with
  `mlx.core.quantize`), a float matrix `w` of shape `{..., rows, len}` is
  quantized along its last axis in groups of `group_size` (32, 64 or 128)
  values with `bits` in 2, 3, 4, 5, 6 or 8:

    * `value` — `{:u, 32}` of shape `{..., rows, len * bits / 32}`: each row
      is a little-endian bit stream, code `i` at bit offset `i * bits`
      (3, 5 and 6 bits straddle words);
    * `scales`, `biases` — `w`'s type, `{..., rows, len / group_size}`;
      `w ≈ code * scale + bias`.

  `transpose` says how `Emily.Quantization.quantized_matmul/2` multiplies:
  `true` (the default) computes `x @ wᵀ` with `w` stored `[out, in]` (the
  MLX and PyTorch layout); `false` computes `x @ w` with `w` stored
  `[in, out]` and quantized along `out` (the AWQ layout).

  Other modes (`"q4_0"`, `"q8_0"`, `"q4_k"`, ...) hold ggml blocks and are
  built by `Emily.Quantization.GGML`.

  The struct is an `Nx.Container` (`value`, `scales` and `biases` are its
  tensors; the other fields are kept as static parameters), so it can be
  passed to `defn` functions and stored as an Axon parameter.
  """

  @derive {Nx.Container,
           containers: [:value, :scales, :biases], keep: [:group_size, :bits, :transpose, :mode]}
  defstruct [:value, :scales, :biases, group_size: 64, bits: 4, transpose: true, mode: "affine"]

  @type t :: %__MODULE__{
          value: Nx.Tensor.t(),
          scales: Nx.Tensor.t(),
          biases: Nx.Tensor.t(),
          group_size: pos_integer(),
          bits: pos_integer(),
          transpose: boolean(),
          mode: String.t()
        }

  @doc """
  Quantizes the float matrix `w` (f32, f16 or bf16, rank >= 2) along its
  last axis.

  ## Options

    * `:group_size` — 32, 64 or 128 values per scale and bias (default 64)
    * `:bits` — 2, 3, 4, 5, 6 or 8 (default 4)
    * `:transpose` — `true` (default): `w` is `[out, in]`; `false`: `w` is
      `[in, out]` (see the module doc)
    * `:mode` — `"affine"` (the only mode this function builds)

  Raises `ArgumentError` for any other value, a non-float `w`, a rank below
  2 or a last axis that is not a multiple of `group_size`.

  ## Examples

      iex> w = Nx.iota({2, 64}, type: :f32)
      iex> qw = Emily.QuantizedWeight.from_dense(w, group_size: 32, bits: 8)
      iex> {qw.value.shape, qw.scales.shape, qw.value.type}
      {{2, 16}, {2, 2}, {:u, 32}}
  """
  @spec from_dense(Nx.Tensor.t(), keyword()) :: t()
  def from_dense(w, opts \\ []) do
    opts = Keyword.validate!(opts, group_size: 64, bits: 4, transpose: true, mode: "affine")
    Emily.Quantization.quantize(w, opts)
  end

  @doc """
  The float matrix a quantized weight stands for, in the layout it was
  quantized from (`[out, in]` for `transpose: true`).
  """
  @spec to_dense(t()) :: Nx.Tensor.t()
  def to_dense(%__MODULE__{} = qw), do: Emily.Quantization.dequantize(qw)
end
