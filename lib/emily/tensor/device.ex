defmodule Emily.Tensor.DeviceOps do
  @moduledoc """
  Moving tensors between devices: `to_device/2` and `device/1`.

  A tensor's operations run on its device; inputs on different devices
  raise `ArgumentError`. `to_device/2` is lazy like any op: the copy happens
  when the result is evaluated, and only the viewed elements travel (a
  sliced or transposed view is made contiguous on its own device first).
  Reading a GPU tensor (`to_binary/2`, `to_list/1`) brings its bytes back
  to the CPU first.
  """

  alias Emily.Native
  alias Emily.Tensor.Core

  @doc """
  The tensor on `device` (`:cpu`, `:gpu` or `{:gpu, index}`); the same
  tensor when it is already there. Raises `ArgumentError` when the device is
  unknown or, for a GPU, when the CUDA backend is not available.

      iex> t = Emily.Tensor.tensor([1.0, 2.0])
      iex> Emily.Tensor.to_device(t, :cpu) |> Emily.Tensor.to_list()
      [1.0, 2.0]
  """
  @spec to_device(Emily.Tensor.t() | number(), Emily.Device.t()) :: Emily.Tensor.t()
  def to_device(tensor, device) do
    t = Core.to_tensor(tensor)
    index = Emily.Device.check!("Emily.Tensor.to_device", device)
    Core.wrap(Native.to_device(Core.ref!(t), index))
  end

  @doc """
  The device a tensor lives on.

      iex> Emily.Tensor.device(Emily.Tensor.tensor([1, 2]))
      :cpu
  """
  @spec device(Emily.Tensor.t()) :: Emily.Device.t()
  def device(tensor) do
    t = Core.to_tensor(tensor)
    Emily.Device.from_index(Native.array_device(Core.ref!(t)))
  end
end
