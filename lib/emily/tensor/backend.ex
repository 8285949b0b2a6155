defmodule Emily.Tensor.Backend do
  @moduledoc """
  Backends, devices and memory of `Emily.Tensor`, with Nx's API
  (`Nx.default_backend/1`, `Nx.backend_copy/2`, `Nx.backend_transfer/2`,
  `Nx.backend_deallocate/1`, `Nx.to_pointer/2`, `Nx.from_pointer/5`).

  Emily has one backend, `Emily.Tensor` itself, on a device: a backend is
  written `Emily.Tensor` or `{Emily.Tensor, device: :cpu}`. The default
  backend is the process's (`default_backend/1`,
  `with_default_backend/2`), else the application's
  (`global_default_backend/1`, the `:default_backend` setting of `:emily`),
  else the CPU. The creation functions (`tensor/2`, `from_binary/3`,
  `iota/2`, `eye/2`, `from_pointer/5`) compute on the default backend's
  device unless given `:backend`. `:cpu` is the only device of this build:
  `:gpu` may be set as the default, but creating a tensor on it raises
  `ArgumentError` until the CUDA backend lands.

  Functions taking a "container" accept a tensor, or tuples and maps
  nesting tensors (as Nx's containers).

  Every function here is delegated from `Emily.Tensor`; call them there.
  """

  alias Emily.Native
  alias Emily.Tensor.{Core, Pointer, Type}

  @typedoc "A backend: `Emily.Tensor` or `{Emily.Tensor, device: :cpu | :gpu}`."
  @type backend :: module() | {module(), keyword()}

  # ---------------------------------------------------------------------------
  # Default backend
  # ---------------------------------------------------------------------------

  @doc """
  The default backend of this process: the one set by
  `default_backend/1` in this process, else the global one
  (`global_default_backend/1`), else `{Emily.Tensor, device: :cpu}`.

  ## Examples

      iex> Emily.Tensor.default_backend()
      {Emily.Tensor, [device: :cpu]}

  """
  @spec default_backend() :: {module(), keyword()}
  def default_backend, do: Core.default_backend()

  @doc """
  Sets the default backend of this process and returns the previous one.

  Raises `ArgumentError` for a backend other than `Emily.Tensor` and for an
  unknown device. Setting `device: :gpu` is accepted; creating a tensor
  then puts it on the GPU, or raises `ArgumentError` saying why when the
  CUDA backend is not available.

  ## Examples

      iex> Emily.Tensor.default_backend({Emily.Tensor, device: :cpu})
      {Emily.Tensor, [device: :cpu]}
      iex> Emily.Tensor.default_backend({Emily.Tensor, device: :gpu})
      {Emily.Tensor, [device: :cpu]}
      iex> Emily.Tensor.default_backend(Emily.Tensor)
      {Emily.Tensor, [device: :gpu]}

      iex> Emily.Tensor.default_backend(Nx.BinaryBackend)
      ** (ArgumentError) Emily has one backend, Emily.Tensor (as `Emily.Tensor` or `{Emily.Tensor, device: :cpu}`), got: Nx.BinaryBackend

  """
  @spec default_backend(backend()) :: {module(), keyword()}
  def default_backend(backend), do: Core.put_default_backend(backend)

  @doc """
  Sets the default backend of every process that has not set its own (the
  `:default_backend` setting of the `:emily` application) and returns the
  previous global one.

  ## Examples

      iex> Emily.Tensor.global_default_backend({Emily.Tensor, device: :cpu})
      {Emily.Tensor, [device: :cpu]}

  """
  @spec global_default_backend(backend()) :: {module(), keyword()}
  def global_default_backend(backend) do
    backend = Core.backend!(backend)
    previous = Core.backend!(Application.get_env(:emily, :default_backend, Emily.Tensor))
    Application.put_env(:emily, :default_backend, backend)
    previous
  end

  @doc """
  Runs `fun` with `backend` as the default backend of this process, then
  restores the previous default (also when `fun` raises). Returns what
  `fun` returns.

  ## Examples

      iex> Emily.Tensor.with_default_backend({Emily.Tensor, device: :cpu}, fn ->
      ...>   Emily.Tensor.default_backend()
      ...> end)
      {Emily.Tensor, [device: :cpu]}

      iex> Emily.Tensor.with_default_backend({Emily.Tensor, device: :cpu}, fn ->
      ...>   Emily.Tensor.device(Emily.Tensor.iota({3}))
      ...> end)
      :cpu

  """
  @spec with_default_backend(backend(), (() -> result)) :: result when result: term()
  def with_default_backend(backend, fun) when is_function(fun, 0) do
    previous = Core.swap_process_backend(Core.backend!(backend))

    try do
      fun.()
    after
      Core.swap_process_backend(previous)
    end
  end

  def with_default_backend(_backend, fun) do
    raise ArgumentError,
          "with_default_backend/2 expects a function of no arguments, got: #{inspect(fun)}"
  end

  # ---------------------------------------------------------------------------
  # Copy, transfer, deallocate
  # ---------------------------------------------------------------------------

  @doc """
  Copies the tensors of a container into new buffers on `backend` (the
  default backend when nil). The copies are evaluated, row-major and own
  their bytes: deallocating the original does not touch them.

  ## Examples

      iex> t = Emily.Tensor.tensor([[1, 2], [3, 4]]) |> Emily.Tensor.transpose()
      iex> Emily.Tensor.backend_copy(t)
      #Emily.Tensor<
        s32[2][2]
        [
          [1, 3],
          [2, 4]
        ]
      >

      iex> {a, b} = Emily.Tensor.backend_copy({Emily.Tensor.tensor(1), Emily.Tensor.tensor(2.0)}, Emily.Tensor)
      iex> {Emily.Tensor.to_number(a), Emily.Tensor.to_number(b)}
      {1, 2.0}

  """
  @spec backend_copy(term(), backend() | nil) :: term()
  def backend_copy(container, backend \\ nil) do
    device = device_of(backend)
    map_tensors(container, "backend_copy", &(&1 |> copy() |> Core.place(device)))
  end

  defp copy(t) do
    ref = live_ref!(t, "backend_copy")
    contiguous = Native.contiguous(ref)
    Emily.eval(contiguous)

    # The engine copies host bytes; a GPU array's own contiguous copy is
    # already a buffer of its own.
    if Native.array_device(ref) == 0,
      do: Core.wrap(Native.copy(contiguous)),
      else: Core.wrap(contiguous)
  end

  @doc """
  Moves the tensors of a container to `backend` (the default backend when
  nil): `{Emily.Tensor, device: :gpu}` copies them to the GPU through
  `Emily.Tensor.to_device/2`, and raises `ArgumentError` saying why when the
  CUDA backend is not available. Tensors already on that device are
  returned unchanged (Nx deallocates the source of a transfer, which here
  is the result itself).

  ## Examples

      iex> t = Emily.Tensor.tensor([1, 2, 3])
      iex> Emily.Tensor.backend_transfer(t) == t
      true

      iex> t = Emily.Tensor.tensor([1])
      iex> Emily.Tensor.backend_transfer({t}, {Emily.Tensor, device: :cpu}) == {t}
      true

  """
  @spec backend_transfer(term(), backend() | nil) :: term()
  def backend_transfer(container, backend \\ nil) do
    device = device_of(backend)
    map_tensors(container, "backend_transfer", &Core.place(&1, device))
  end

  @doc """
  Releases the engine's reference to the tensor's data now, instead of
  when the tensor is garbage collected. Returns `:ok`, or
  `:already_deallocated` when it was released before (or is a template,
  which has no data). Any later use of the tensor raises `ArgumentError`
  ("the tensor was deallocated"); copies and tensors computed from it
  before are unaffected. For a container, deallocates every tensor and
  returns `:ok`.

  Deallocating a tensor that another process is using at that moment is
  safe: a call already running keeps its view, and the memory is released
  as soon as no Emily call is in flight (at once when none is). Later
  calls, from any process, raise.

  ## Examples

      iex> t = Emily.Tensor.tensor([1, 2, 3])
      iex> Emily.Tensor.backend_deallocate(t)
      :ok
      iex> Emily.Tensor.backend_deallocate(t)
      :already_deallocated
      iex> Emily.Tensor.add(t, 1)
      ** (ArgumentError) add: argument left: the tensor was deallocated (backend_deallocate/1); it can no longer be used

  """
  @spec backend_deallocate(term()) :: :ok | :already_deallocated
  def backend_deallocate(%Emily.Tensor{ref: ref}) when is_reference(ref),
    do: Native.deallocate(ref)

  def backend_deallocate(%Emily.Tensor{}), do: :already_deallocated

  def backend_deallocate(container) when is_tuple(container) or is_map(container) do
    map_tensors(container, "backend_deallocate", &backend_deallocate/1)
    :ok
  end

  def backend_deallocate(other) do
    raise ArgumentError,
          "backend_deallocate/1 expects a tensor or a container of tensors, got: #{inspect(other)}"
  end

  # ---------------------------------------------------------------------------
  # Pointers
  # ---------------------------------------------------------------------------

  @doc """
  A pointer to the tensor's bytes, row-major in native endianness
  (`%Emily.Tensor.Pointer{kind: :local, address: integer, data_size: bytes}`).

  The tensor is evaluated first (a row-major copy is made when it is a
  strided view). The bytes are pinned: never written again, and kept
  alive for as long as the tensor lives, that is until it is deallocated
  or garbage collected: keep the tensor referenced while the pointer is
  in use. The same tensor gives the same pointer again.

  ## Options

    * `:mode` - `:local` (the default); `:ipc` raises `ArgumentError`:
      Emily has no inter-process memory handles

  ## Examples

      iex> t = Emily.Tensor.tensor([10, 20, 30], type: :u8)
      iex> pointer = Emily.Tensor.to_pointer(t)
      iex> {pointer.kind, pointer.data_size, is_integer(pointer.address)}
      {:local, 3, true}
      iex> copy = Emily.Tensor.from_pointer(Emily.Tensor, pointer, :u8, {3})
      iex> Emily.Tensor.to_list(copy) == Emily.Tensor.to_list(t)
      true

  """
  @spec to_pointer(Emily.Tensor.t(), keyword()) :: Pointer.t()
  def to_pointer(tensor, opts \\ [])

  def to_pointer(%Emily.Tensor{} = t, opts) do
    opts = Core.options!(opts, mode: :local)

    case opts[:mode] do
      :local ->
        :ok

      :ipc ->
        raise ArgumentError, "to_pointer: mode :ipc is not supported by Emily (use :local)"

      other ->
        raise ArgumentError, "to_pointer: :mode must be :local or :ipc, got: #{inspect(other)}"
    end

    ref = live_ref!(t, "to_pointer")
    contiguous = Native.contiguous(ref)
    Emily.eval(contiguous)
    {address, size} = Native.to_pointer(ref, contiguous)
    %Pointer{kind: :local, address: address, data_size: size}
  end

  def to_pointer(other, _opts),
    do: raise(ArgumentError, "to_pointer/2 expects a tensor, got: #{inspect(other)}")

  @doc """
  A new tensor of `type` and `shape` with a copy of the bytes at a
  pointer that `to_pointer/2` returned in this VM, while its tensor is
  alive. Any other address (and a range running past the pointed-to
  bytes) raises `ArgumentError` rather than reading unknown memory: the VM
  cannot crash here.

  `backend` is `Emily.Tensor` or `{Emily.Tensor, device: device}`; the
  pointer a `%Emily.Tensor.Pointer{}` or any map with its keys (an
  `Nx.Pointer`). `:ipc` pointers raise `ArgumentError`.

  ## Options

    * `:names` - only `nil` names are accepted

  ## Examples

      iex> t = Emily.Tensor.tensor([[1.5, 2.5], [3.5, 4.5]])
      iex> pointer = Emily.Tensor.to_pointer(t)
      iex> flat = Emily.Tensor.from_pointer({Emily.Tensor, device: :cpu}, pointer, {:f, 32}, {4})
      iex> Emily.Tensor.to_list(flat)
      [1.5, 2.5, 3.5, 4.5]
      iex> Emily.Tensor.shape(t)
      {2, 2}

      iex> pointer = %Emily.Tensor.Pointer{kind: :local, address: 4096, data_size: 4}
      iex> Emily.Tensor.from_pointer(Emily.Tensor, pointer, :f32, {})
      ** (ArgumentError) from_pointer: address 0x1000 with 4 bytes is not inside a pointer that to_pointer/2 handed out in this VM and whose tensor is still alive

  """
  @spec from_pointer(backend(), Pointer.t() | map(), term(), tuple(), keyword()) ::
          Emily.Tensor.t()
  def from_pointer(backend, pointer, type, shape, opts \\ []) do
    opts = Core.options!(opts, names: nil)
    Core.device!(elem(Core.backend!(backend), 1)[:device])
    type = Type.normalize!(type)

    unless is_tuple(shape) and Enum.all?(Tuple.to_list(shape), &(is_integer(&1) and &1 >= 0)) do
      raise ArgumentError, "from_pointer: expected a shape tuple, got: #{inspect(shape)}"
    end

    if opts[:names] != nil and Enum.any?(opts[:names], &(&1 != nil)) do
      raise ArgumentError, "from_pointer: Emily has no named axes, got: #{inspect(opts[:names])}"
    end

    needed = shape |> Tuple.to_list() |> Enum.reduce(Type.byte_size(type), &(&1 * &2))

    case pointer do
      %{kind: :local, address: address, data_size: size} when is_integer(address) ->
        if is_integer(size) and size < needed do
          raise ArgumentError,
                "from_pointer: #{Type.to_string(type)}#{inspect(shape)} needs #{needed} bytes, " <>
                  "the pointer has #{size}"
        end

        Core.wrap(Native.from_pointer(address, Tuple.to_list(shape), type))

      %{kind: :ipc} ->
        raise ArgumentError, "from_pointer: :ipc pointers are not supported by Emily"

      other ->
        raise ArgumentError,
              "from_pointer: expected a pointer (%Emily.Tensor.Pointer{kind: :local, address: ...}), " <>
                "got: #{inspect(other)}"
    end
  end

  # ---------------------------------------------------------------------------
  # Helpers
  # ---------------------------------------------------------------------------

  defp device_of(nil), do: Core.device_for([])
  defp device_of(backend), do: Core.device_for(backend: backend)

  defp live_ref!(%Emily.Tensor{ref: ref}, _function) when is_reference(ref), do: ref

  defp live_ref!(%Emily.Tensor{}, function) do
    raise ArgumentError,
          "#{function}: the tensor is a template (a shape and a type without data)"
  end

  @doc false
  # Applies `fun` to every tensor of a container (numbers become tensors),
  # keeping its tuples and maps.
  def map_tensors(%Emily.Tensor{} = t, _function, fun), do: fun.(t)

  def map_tensors(x, _function, fun) when is_number(x) or is_struct(x, Emily.Complex),
    do: fun.(Core.to_tensor(x))

  def map_tensors(tuple, function, fun) when is_tuple(tuple) do
    tuple |> Tuple.to_list() |> Enum.map(&map_tensors(&1, function, fun)) |> List.to_tuple()
  end

  def map_tensors(map, function, fun) when is_map(map) and not is_struct(map) do
    Map.new(map, fn {k, v} -> {k, map_tensors(v, function, fun)} end)
  end

  def map_tensors(other, function, _fun) do
    raise ArgumentError,
          "#{function} expects a tensor, a number or a tuple or map of them, got: #{inspect(other)}"
  end
end
