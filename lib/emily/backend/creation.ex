defmodule Emily.Backend.Creation do
  @moduledoc false
  # Backend options and the creation callbacks of Emily.Backend: every new
  # tensor is put on the device of the backend options it was created with.

  alias Emily.Backend.Util
  alias Emily.Native

  @doc """
  Validates the backend options: `device:` (`:cpu`, `:gpu` or
  `{:gpu, index}`; default `:cpu`, or the stream's device) and `stream:`
  (an `Emily.Stream`, or nil for the process's current stream).
  """
  def init(opts) when is_list(opts) do
    opts =
      case Keyword.validate(opts, device: nil, stream: nil) do
        {:ok, opts} ->
          opts

        {:error, unknown} ->
          raise ArgumentError,
                "Emily.Backend: unknown options #{inspect(unknown)}, the options are :device and :stream"
      end

    stream =
      case opts[:stream] do
        nil -> nil
        %Emily.Stream{} = stream -> stream
        other -> raise ArgumentError, "Emily.Backend: :stream must be an Emily.Stream, got: #{inspect(other)}"
      end

    device = opts[:device] || (stream && stream.device) || :cpu
    # Normalises the device and rejects unknown ones now, so that a typo
    # fails at Nx.default_backend/1 and not at the first tensor.
    Emily.Device.to_index!(device, "Emily.Backend")

    if stream && Emily.Device.to_index!(stream.device) != Emily.Device.to_index!(device) do
      raise ArgumentError,
            "Emily.Backend: the stream runs on #{inspect(stream.device)} but the device is #{inspect(device)}"
    end

    [device: device, stream: stream]
  end

  def init(other), do: raise(ArgumentError, "Emily.Backend: expected a keyword list of options, got: #{inspect(other)}")

  @doc """
  The engine device number of backend options; raises `ArgumentError`
  saying why when it is a GPU and the CUDA backend cannot be used.
  """
  def device_index(opts) do
    case Keyword.get(opts, :device, :cpu) do
      :cpu -> 0
      device -> Emily.Device.check!("Emily.Backend", device)
    end
  end

  @doc "Wraps a freshly created ref, placed on the options' device."
  def place(out, ref, opts) do
    ref =
      case device_index(opts) do
        0 -> ref
        device -> Native.to_device(ref, device)
      end

    %{out | data: %Emily.Backend{ref: Util.cast(ref, out.type), stream: opts[:stream]}}
  end

  def constant(%{type: type, shape: shape} = out, number, opts) do
    Util.engine_type!(type, :constant)
    place(out, Util.full(number, Util.dims(shape), type), opts)
  end

  def from_binary(%{type: type, shape: shape} = out, binary, opts) do
    place(out, Util.from_binary(binary, Util.dims(shape), type, :from_binary), opts)
  end

  # eye and iota of an 8-bit float are made in f16 and rounded by place/3.
  def eye(%{type: type, shape: shape} = out, opts) do
    place(out, Native.eye(Util.dims(shape), 0, Util.engine_type!(type, :eye)), opts)
  end

  def iota(%{type: type, shape: shape} = out, nil, opts) do
    size = Tuple.product(shape)
    ref = Native.iota([size], 0, Util.engine_type!(type, :iota)) |> Native.reshape(Util.dims(shape))
    place(out, ref, opts)
  end

  def iota(%{type: type, shape: shape} = out, axis, opts) do
    place(out, Native.iota(Util.dims(shape), axis, Util.engine_type!(type, :iota)), opts)
  end
end
