defmodule Emily.Device do
  @moduledoc """
  Devices a tensor can live on: `:cpu` (the default) and `:gpu` (CUDA
  device 0) or `{:gpu, index}`.

  The GPU backend is a separate shared library (`libemily_cuda.so`, next to
  the NIF) that the engine loads on first GPU use; a machine without it, or
  without a CUDA driver or device, raises `ArgumentError` whose message says
  why. Operations whose inputs live on different devices raise
  `ArgumentError`: data only moves through `Nx.backend_transfer/2` or
  `Nx.backend_copy/2` with `{Emily.Backend, device: ...}`.
  """

  alias Emily.Native

  @typedoc "A device: `:cpu`, `:gpu` (GPU 0) or `{:gpu, index}`."
  @type t :: :cpu | :gpu | {:gpu, non_neg_integer()}

  @doc """
  The engine's number for a device (0 for the CPU, 1 + index for a GPU), or
  an `ArgumentError` for anything else.

      iex> Emily.Device.to_index!(:cpu)
      0
      iex> Emily.Device.to_index!({:gpu, 1})
      2
  """
  @spec to_index!(term(), String.t()) :: non_neg_integer()
  def to_index!(device, function \\ "Emily.Device.to_index!") do
    case device do
      :cpu -> 0
      gpu when gpu in [:gpu, :cuda] -> 1
      {:gpu, i} when is_integer(i) and i >= 0 and i < 8 -> 1 + i
      other -> raise ArgumentError, "#{function}: unknown device #{inspect(other)} (expected :cpu, :gpu or {:gpu, index})"
    end
  end

  @doc """
  The device for an engine number (the inverse of `to_index!/2`).

      iex> Emily.Device.from_index(0)
      :cpu
      iex> Emily.Device.from_index(1)
      {:gpu, 0}
  """
  @spec from_index(non_neg_integer()) :: t()
  def from_index(0), do: :cpu
  def from_index(i) when is_integer(i) and i > 0, do: {:gpu, i - 1}

  @doc """
  `:ok` when `device` can run work, else `{:error, reason}`.

      iex> Emily.Device.available(:cpu)
      :ok
  """
  @spec available(t()) :: :ok | {:error, String.t()}
  def available(device), do: Native.device_available(to_index!(device, "Emily.Device.available"))

  @doc """
  Raises `ArgumentError` naming `function` and the reason when `device` is
  not usable; returns the engine's device number otherwise.

      iex> Emily.Device.check!("Emily.Stream.new", :cpu)
      0
  """
  @spec check!(String.t(), term()) :: non_neg_integer()
  def check!(function, device) do
    index = to_index!(device, function)

    case Native.device_available(index) do
      :ok ->
        index

      {:error, reason} ->
        reason = String.replace_prefix(reason, "CUDA backend not available: ", "")

        raise ArgumentError,
              "#{function}: device #{inspect(device)}: the CUDA backend is not available (#{reason})"
    end
  end
end
