defmodule Emily.Tensor.FFT do
  @moduledoc """
  Discrete Fourier transforms with Nx's API: `fft/2`, `ifft/2`, `fft2/2`,
  `ifft2/2`, `rfft/2` and `irfft/2`.

  Transforms of any length run in the engine (`include/emily_fft.h`):
  radix-2 for powers of two and Bluestein's algorithm otherwise, in double
  precision, over every row of the other axes in parallel. Scaling is
  numpy's and Nx's: the forward transform is unscaled, the inverse divides
  by the length. Results are `to_complex` of the input type (c64, or c128
  for f64/c128 inputs); `irfft` gives the real counterpart. `:eps`
  (default `1.0e-10`) is Nx's clean-up threshold: real and imaginary parts
  of the result below it in magnitude are stored as 0.0.
  """

  alias Emily.Native
  alias Emily.Tensor.{Core, Type}

  # The engine reads f32/f64/c64/c128; anything else goes through its complex type.
  defp prepare(t, complex?) do
    t = Core.to_tensor(t)

    if tuple_size(t.shape) == 0 do
      raise ArgumentError, "expected a tensor of rank >= 1, got a scalar tensor"
    end

    type =
      case t.type do
        {:f, 32} when not complex? -> {:f, 32}
        {:f, 64} when not complex? -> {:f, 64}
        other -> Type.to_complex(other)
      end

    Core.cast(t, type)
  end

  defp length!(nil, size), do: size
  defp length!(:power_of_two, size), do: next_pow2(max(size, 1), 1)
  defp length!(n, _size) when is_integer(n) and n > 0, do: n

  defp length!(other, _size),
    do:
      raise(
        ArgumentError,
        "expected a positive integer or :power_of_two as :length, got: #{inspect(other)}"
      )

  defp next_pow2(size, p) when p >= size, do: p
  defp next_pow2(size, p), do: next_pow2(size, p * 2)

  defp run(t, axis, n, mode, eps),
    do: Core.wrap(Native.fft(Core.ref!(t), axis, n, mode, eps!(eps)))

  defp eps!(eps) when is_number(eps) and eps >= 0, do: eps * 1.0
  defp eps!(eps), do: raise(ArgumentError, "expected :eps to be a number >= 0, got: #{inspect(eps)}")

  defp one(t, opts, mode) do
    opts = Core.options!(opts, length: nil, axis: -1, eps: 1.0e-10)
    t = prepare(t, true)
    axis = Core.axis!(opts[:axis], tuple_size(t.shape))
    run(t, axis, length!(opts[:length], elem(t.shape, axis)), mode, opts[:eps])
  end

  @doc """
  The discrete Fourier transform along `:axis` (default -1). `:length`
  (default: the axis size) pads with zeros or crops the input first;
  `:power_of_two` pads to the next power of two.

      iex> Emily.Tensor.FFT.fft(Emily.Tensor.tensor([1, 1, 0, 0]))
      #Emily.Tensor<
        c64[4]
        [2.0+0.0i, 1.0-1.0i, 0.0+0.0i, 1.0+1.0i]
      >

      iex> Emily.Tensor.FFT.fft(Emily.Tensor.tensor([1, 1, 1, 0, 1, 1]), length: 4)
      #Emily.Tensor<
        c64[4]
        [3.0+0.0i, 0.0-1.0i, 1.0+0.0i, 0.0+1.0i]
      >
  """
  def fft(t, opts \\ []), do: one(t, opts, :forward)

  @doc """
  The inverse discrete Fourier transform (scaled by 1/length); options as
  `fft/2`.

      iex> Emily.Tensor.FFT.ifft(Emily.Tensor.tensor([2, Emily.Complex.new(1, -1), 0, Emily.Complex.new(1, 1)]))
      #Emily.Tensor<
        c64[4]
        [1.0+0.0i, 1.0+0.0i, 0.0+0.0i, 0.0+0.0i]
      >
  """
  def ifft(t, opts \\ []), do: one(t, opts, :inverse)

  defp two(t, opts, mode) do
    opts = Core.options!(opts, lengths: nil, axes: [-2, -1], eps: 1.0e-10)
    t = prepare(t, true)
    rank = tuple_size(t.shape)

    if rank < 2 do
      raise ArgumentError, "expected a tensor of rank >= 2, got shape #{inspect(t.shape)}"
    end

    axes = Core.axes!(opts[:axes], rank)

    unless length(axes) == 2 do
      raise ArgumentError, "expected :axes to have 2 entries, got: #{inspect(opts[:axes])}"
    end

    lengths =
      case opts[:lengths] do
        nil ->
          Enum.map(axes, &elem(t.shape, &1))

        [_, _] = ls ->
          Enum.zip_with(ls, axes, fn l, a -> length!(l, elem(t.shape, a)) end)

        other ->
          raise ArgumentError, "expected :lengths to be a list of 2 lengths, got: #{inspect(other)}"
      end

    Enum.zip(axes, lengths)
    |> Enum.reverse()
    |> Enum.reduce(t, fn {axis, n}, acc -> run(acc, axis, n, mode, opts[:eps]) end)
  end

  @doc """
  The 2-D discrete Fourier transform over `:axes` (default `[-2, -1]`);
  `:lengths` pads or crops each of them.

      iex> Emily.Tensor.FFT.fft2(Emily.Tensor.tensor([[1, 0], [1, 1]]))
      #Emily.Tensor<
        c64[2][2]
        [
          [3.0+0.0i, 1.0+0.0i],
          [-1.0+0.0i, 1.0+0.0i]
        ]
      >
  """
  def fft2(t, opts \\ []), do: two(t, opts, :forward)

  @doc """
  The inverse 2-D discrete Fourier transform; options as `fft2/2`.

      iex> Emily.Tensor.FFT.ifft2(Emily.Tensor.tensor([[3, 1], [-1, 1]]))
      #Emily.Tensor<
        c64[2][2]
        [
          [1.0+0.0i, 0.0+0.0i],
          [1.0+0.0i, 1.0+0.0i]
        ]
      >
  """
  def ifft2(t, opts \\ []), do: two(t, opts, :inverse)

  @doc """
  The transform of a real signal, keeping the `length/2 + 1` non-negative
  frequencies (the others are their conjugates). `:length` and `:axis` as
  `fft/2`.

      iex> Emily.Tensor.FFT.rfft(Emily.Tensor.tensor([1, 1, 0, 0]))
      #Emily.Tensor<
        c64[3]
        [2.0+0.0i, 1.0-1.0i, 0.0+0.0i]
      >
  """
  def rfft(t, opts \\ []) do
    opts = Core.options!(opts, length: nil, axis: -1, eps: 1.0e-10)
    t = prepare(t, false)
    axis = Core.axis!(opts[:axis], tuple_size(t.shape))
    run(t, axis, length!(opts[:length], elem(t.shape, axis)), :rfft, opts[:eps])
  end

  @doc """
  The inverse of `rfft/2`: the input holds the non-negative frequencies of
  a Hermitian spectrum; the result is the real signal of `:length`
  (default `2 * (m - 1)` for an axis of size m).

      iex> Emily.Tensor.FFT.irfft(Emily.Tensor.tensor([2, Emily.Complex.new(1, -1), 0]))
      #Emily.Tensor<
        f32[4]
        [1.0, 1.0, 0.0, 0.0]
      >
  """
  def irfft(t, opts \\ []) do
    opts = Core.options!(opts, length: nil, axis: -1, eps: 1.0e-10)
    t = prepare(t, true)
    axis = Core.axis!(opts[:axis], tuple_size(t.shape))
    m = elem(t.shape, axis)
    n = if opts[:length], do: length!(opts[:length], m), else: max(2 * (m - 1), 1)
    run(t, axis, n, :irfft, opts[:eps])
  end
end
