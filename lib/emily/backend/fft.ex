defmodule Emily.Backend.FFT do
  @moduledoc false
  # Fourier transforms of Emily.Backend on the engine's fft (any axis;
  # forward, inverse, real and inverse-real modes): the fft/ifft callbacks
  # and the fft2, ifft2, rfft and irfft blocks.

  alias Emily.Backend.Util
  alias Emily.Native

  def fft(out, tensor, opts), do: transform(out, tensor, opts[:axis], opts[:length], :forward, opts[:eps])
  def ifft(out, tensor, opts), do: transform(out, tensor, opts[:axis], opts[:length], :inverse, opts[:eps])

  @doc "fft2/ifft2: the last of the two axes first, as Nx's composition."
  def fft2(out, tensor, %{axes: [ax1, ax2], lengths: [l1, l2], eps: eps}, mode) do
    ref = Util.ref_as(tensor, out.type)
    ref = Native.fft(ref, ax2, l2, mode, eps(eps))
    Util.wrap(out, Native.fft(ref, ax1, l1, mode, eps(eps)), [tensor])
  end

  @doc "rfft: real input (f32/f64, integers as f32), the non-negative half out."
  def rfft(out, tensor, %{axis: axis, length: length, eps: eps}) do
    ref = Util.ref_as(tensor, real_of(out.type))
    Util.wrap(out, Native.fft(ref, axis, length, :rfft, eps(eps)), [tensor])
  end

  @doc "irfft: a Hermitian half in, the real signal of `length` out."
  def irfft(out, tensor, %{axis: axis, length: length, eps: eps}) do
    ref = Util.ref_as(tensor, complex_of(out.type))
    Util.wrap(out, Native.fft(ref, axis, length, :irfft, eps(eps)), [tensor])
  end

  defp transform(out, tensor, axis, length, mode, eps) do
    ref = Util.ref_as(tensor, out.type)
    Util.wrap(out, Native.fft(ref, axis, length, mode, eps(eps)), [tensor])
  end

  defp eps(nil), do: 0.0
  defp eps(eps), do: eps * 1.0

  defp real_of({:c, 64}), do: {:f, 32}
  defp real_of({:c, 128}), do: {:f, 64}

  defp complex_of({:f, 64}), do: {:c, 128}
  defp complex_of(_), do: {:c, 64}
end
