defmodule Emily.Backend.Transfer do
  @moduledoc false
  # Data movement of Emily.Backend: reads (to_binary, inspect, to_batched,
  # pointers), copies and transfers between devices and backends, early
  # deallocation. Reads are where lazy graphs are evaluated.

  alias Emily.Backend.{Creation, Util}
  alias Emily.Native
  alias Nx.Tensor, as: T

  @doc """
  The tensor's bytes, at most `limit` elements of them. Evaluates (on the
  tensor's stream when it has one) and returns the engine's resource binary
  itself, or a sub-binary of it: never a copy.
  """
  def to_binary(%T{type: {_, bits}} = t, limit) do
    bytes = Util.to_storage(live_ref!(t, :to_binary), t.type)
    binary = on_stream(t, fn -> Emily.to_binary(bytes) end)
    bytes = div(limit * bits, 8)
    if bytes >= byte_size(binary), do: binary, else: binary_part(binary, 0, bytes)
  end

  @doc "Inspect as `Nx.BinaryBackend` does: reads only what the limit shows."
  def inspect(t, inspect_opts) do
    limit = inspect_opts.limit
    binary = Nx.to_binary(t, if(limit == :infinity, do: [], else: [limit: limit + 1]))
    Nx.Backend.inspect(t, binary, inspect_opts)
  end

  @doc """
  A copy on `backend`: on Emily, a new engine node on the requested device
  (unaffected by deallocating the source); elsewhere, the other backend's
  `from_binary/3` on our bytes.
  """
  def backend_copy(%T{} = t, Emily.Backend, opts) do
    opts = Creation.init(opts)
    ref = live_ref!(t, :backend_copy)
    device = Creation.device_index(opts)

    ref =
      if Native.array_device(ref) == device,
        do: Native.contiguous(ref),
        else: Native.to_device(ref, device)

    %{t | data: %Emily.Backend{ref: ref, stream: opts[:stream]}}
  end

  def backend_copy(t, Nx.Tensor, opts), do: backend_copy(t, Nx.BinaryBackend, opts)

  def backend_copy(%T{} = t, backend, opts) do
    backend.from_binary(t, to_binary(t, Nx.size(t)), opts)
  end

  @doc """
  Moves to `backend` and releases our reference. Emily on the same device
  (and `Nx.Tensor`, "wherever it is") keeps the tensor as it is.
  """
  def backend_transfer(%T{} = t, Nx.Tensor, _opts), do: t

  def backend_transfer(%T{} = t, Emily.Backend, opts) do
    opts = Creation.init(opts)
    ref = live_ref!(t, :backend_transfer)

    if Native.array_device(ref) == Creation.device_index(opts) do
      t
    else
      copy = backend_copy(t, Emily.Backend, opts)
      Native.deallocate(ref)
      copy
    end
  end

  def backend_transfer(%T{} = t, backend, opts) do
    copy = backend_copy(t, backend, opts)
    backend_deallocate(t)
    copy
  end

  def backend_deallocate(%T{data: %Emily.Backend{ref: ref}}), do: Native.deallocate(ref)

  @doc """
  Batches of `out`'s shape along axis 0, as a lazy stream of views. A short
  last batch is dropped (`leftover: :discard`) or completed from the start
  of the tensor (`leftover: :repeat`), as `Nx.to_batched/3` documents.
  """
  def to_batched(out, %T{shape: shape} = t, opts) do
    batch_size = elem(out.shape, 0)
    axis_size = elem(shape, 0)
    full_batches = div(axis_size, batch_size)
    leftover = rem(axis_size, batch_size)
    ref = live_ref!(t, :to_batched)
    rank = tuple_size(shape)
    dims = Util.dims(shape)

    slice = fn from, len ->
      Native.slice(ref, [from | List.duplicate(0, rank - 1)], [from + len | tl(dims)], List.duplicate(1, rank))
    end

    last = if leftover != 0 and opts[:leftover] == :repeat, do: full_batches, else: full_batches - 1

    Stream.map(0..last//1, fn
      ^full_batches ->
        start = full_batches * batch_size
        ref = Native.concatenate([slice.(start, leftover), slice.(0, batch_size - leftover)], 0)
        Util.wrap(out, ref, [t])

      i ->
        Util.wrap(out, slice.(i * batch_size, batch_size), [t])
    end)
  end

  @doc """
  `Nx.to_pointer/2` (`mode: :local` only): the address of the evaluated,
  row-major bytes, valid while the tensor lives.
  """
  def to_pointer(%T{} = t, opts) do
    case Keyword.get(opts, :mode, :local) do
      :local -> :ok
      :ipc -> raise ArgumentError, "Emily.Backend.to_pointer: mode :ipc is not supported (use :local)"
      other -> raise ArgumentError, "Emily.Backend.to_pointer: :mode must be :local or :ipc, got: #{inspect(other)}"
    end

    ref = live_ref!(t, :to_pointer)
    contiguous = ref |> Util.to_storage(t.type) |> Native.contiguous()
    on_stream(t, fn -> Emily.eval(contiguous) end)
    {address, size} = Native.to_pointer(ref, contiguous)
    %Nx.Pointer{kind: :local, address: address, data_size: size}
  end

  @doc """
  `Nx.from_pointer/5`: a copy of the bytes at a pointer that `to_pointer/2`
  handed out in this VM while its tensor is alive (any other address raises
  rather than reading unknown memory).
  """
  def from_pointer(pointer, type, shape, backend_opts, opts) do
    backend_opts = Creation.init(backend_opts)
    storage = Util.storage_type(type, :from_pointer)
    {_, bits} = type
    needed = div(Tuple.product(shape) * bits, 8)

    ref =
      case pointer do
        %{kind: :local, address: address, data_size: size} when is_integer(address) ->
          if is_integer(size) and size < needed do
            raise ArgumentError,
                  "Emily.Backend.from_pointer: #{Util.type_name(type)}#{inspect(shape)} needs #{needed} bytes, the pointer has #{size}"
          end

          address |> Native.from_pointer(Util.dims(shape), storage) |> Util.from_storage(type)

        %{kind: :ipc} ->
          raise ArgumentError, "Emily.Backend.from_pointer: :ipc pointers are not supported"

        other ->
          raise ArgumentError, "Emily.Backend.from_pointer: expected an Nx.Pointer, got: #{inspect(other)}"
      end

    names = opts[:names] || List.duplicate(nil, tuple_size(shape))
    out = %T{type: type, shape: shape, names: names}
    Creation.place(out, ref, backend_opts)
  end

  defp on_stream(%T{data: %Emily.Backend{stream: %Emily.Stream{} = stream}}, fun),
    do: Emily.Stream.with_stream(stream, fun)

  defp on_stream(_t, fun), do: fun.()

  # An engine array lives in the memory of the node that made it; its
  # reference reaches another node as a plain reference (the NIF would only
  # say "not an Emily array reference"), so a read names the cause.
  defp live_ref!(%T{data: %Emily.Backend{ref: ref}}, op)
       when is_reference(ref) and node(ref) != node() do
    raise ArgumentError,
          "Emily.Backend.#{op}: this tensor's engine array lives on node " <>
            "#{Kernel.inspect(node(ref))} and cannot be read on #{Kernel.inspect(node())}: " <>
            "an Emily.Backend tensor does not cross BEAM nodes; copy it to Nx.BinaryBackend " <>
            "before sending it (Nx.backend_copy/2, or Emily.Serving.portable/1 and " <>
            "Emily.Serving.distributed/1 for a serving)"
  end

  defp live_ref!(%T{data: %Emily.Backend{ref: ref}}, _op) when is_reference(ref), do: ref

  defp live_ref!(t, op) do
    raise ArgumentError, "Emily.Backend.#{op}: expected an Emily.Backend tensor, got: #{Kernel.inspect(t)}"
  end
end
