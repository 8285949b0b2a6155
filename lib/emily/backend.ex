defmodule Emily.Backend do
  @moduledoc """
  An `Nx.Backend` on libemily: every `Nx.*` call on an Emily tensor runs on
  the engine.

      Nx.default_backend(Emily.Backend)
      Nx.tensor([1.0, 2.0, 3.0]) |> Nx.multiply(2) |> Nx.sum()

      t = Nx.tensor([1, 2, 3], backend: {Emily.Backend, device: :cpu})
      t.data.ref   # the engine tensor (see `Emily`)

  ## Options

    * `:device` - `:cpu` (the default), `:gpu` (GPU 0) or `{:gpu, index}`.
      Creation functions (`Nx.tensor/2`, `Nx.from_binary/3`, `Nx.iota/2`,
      `Nx.eye/2`, constants) put their result there; an op runs where its
      inputs live. A GPU needs the CUDA backend (`libemily_cuda.so`, a
      driver and a device): without it, creating a tensor on `:gpu` raises
      `ArgumentError` giving the reason. Data moves between devices only
      through `Nx.backend_copy/2` and `Nx.backend_transfer/2`, e.g.
      `Nx.backend_transfer(t, {Emily.Backend, device: :gpu})`.
    * `:stream` - an `Emily.Stream` on which tensors created with these
      options, and every tensor computed from them, are evaluated when
      read. Without it reads use the process's current stream
      (`Emily.Stream.with_stream/2`).

  ## Laziness

  An `Nx.*` call only builds a node of the engine's graph and returns in
  microseconds; nothing is computed until the tensor is read
  (`Nx.to_binary/1`, `Nx.to_number/1`, `inspect/1`, `Nx.to_pointer/2`, a
  transfer to another backend) or `Emily.eval/1` is called on
  `t.data.ref`. Errors that depend on data (a singular matrix in
  `Nx.LinAlg.solve/2`) surface at that read.

  ## Memory

  `Nx.to_binary/1` is zero-copy: it returns a resource binary aliasing the
  engine's buffer (see `Emily.to_binary/1` for what that means for garbage
  collection). `Nx.from_binary/3` aliases large binaries instead of copying
  them. `Nx.backend_deallocate/1` releases the tensor's reference at once:
  later use of that tensor raises, tensors computed from it before do not
  notice.

  ## Types

  Every Nx type but the sub-byte integers (`u2`, `u4`, `s2`, `s4`): those
  raise `ArgumentError` naming the type. Predicates are `u8`, as in Nx (the
  engine's boolean is a free bitcast of it).

  The 8-bit floats `f8` (E5M2) and `f8_e4m3fn` (E4M3FN) have no engine
  type: their tensors are engine f16 tensors holding only values of the
  8-bit type (every such value is exact in f16). Ops compute in f16 and
  round their result to the 8-bit type, to nearest even: E5M2 overflows
  to infinity, E4M3FN (which has no infinities) saturates at ±448, as Nx
  writes it. Their bytes (`Nx.to_binary/1`, `Nx.from_binary/3`, pointers,
  `Nx.bitcast/2`) are Nx's one byte per element. Literals (`Nx.tensor/2`,
  constants) are written as Nx writes them, which for E5M2 truncates
  (`Nx.tensor(1.4, type: :f8)` is 1.25, `Nx.as_type/2` of the f32 1.4 is
  1.5).

  ## Native and composed

  Every callback of `Nx.Backend` runs on engine ops. For `Nx.block/4`,
  these run on engine kernels: `Nx.LinAlg.cholesky/1`, `solve/2`, `qr/2`,
  `eigh/2`, `svd/2`, `lu/2`, `determinant/1`; the cumulative sum, product,
  min and max; `Nx.take/3`, `Nx.take_along_axis/3`, `Nx.top_k/2`;
  `Nx.fft2/2`, `Nx.ifft2/2`, `Nx.rfft/2`, `Nx.irfft/2`; `Nx.logical_not/1`,
  `Nx.phase/1` of complex tensors. Anything else (`Nx.all_close/3`, inputs
  a kernel does not take) runs Nx's default composition, itself on
  Emily tensors: nothing falls back to `Nx.BinaryBackend`.
  `Nx.reduce/4` and `Nx.window_reduce/5` with a user function fold the
  reduced elements with that function on whole vectors of engine tensors.

  Tensors of other backends given to an op (say a `Nx.BinaryBackend`
  constant: `defn` embeds its constants that way) are copied in through
  their binary, onto the device of the op's Emily inputs, or, when it has
  none, the device of the process's default backend.
  """

  @behaviour Nx.Backend

  @enforce_keys [:ref]
  defstruct [:ref, stream: nil]

  @type t :: %__MODULE__{ref: reference(), stream: Emily.Stream.t() | nil}

  alias Emily.Backend.{Block, Conv, Creation, Elementwise, FFT, Indexing, LinAlg}
  alias Emily.Backend.{Reduction, Shape, Transfer, Window}

  @impl true
  defdelegate init(opts), to: Creation

  # ---- creation ----
  @impl true
  defdelegate constant(out, number, opts), to: Creation
  @impl true
  defdelegate from_binary(out, binary, opts), to: Creation
  @impl true
  defdelegate eye(out, opts), to: Creation
  @impl true
  defdelegate iota(out, axis, opts), to: Creation

  # ---- data movement ----
  @impl true
  defdelegate to_binary(tensor, limit), to: Transfer
  @impl true
  defdelegate inspect(tensor, inspect_opts), to: Transfer
  @impl true
  defdelegate backend_copy(tensor, backend, opts), to: Transfer
  @impl true
  defdelegate backend_transfer(tensor, backend, opts), to: Transfer
  @impl true
  defdelegate backend_deallocate(tensor), to: Transfer
  @impl true
  defdelegate to_batched(out, tensor, opts), to: Transfer
  @impl true
  defdelegate to_pointer(tensor, opts), to: Transfer
  @impl true
  defdelegate from_pointer(pointer, type, shape, backend_opts, opts), to: Transfer

  # ---- elementwise ----
  for op <- Elementwise.unary_ops() do
    @impl true
    defdelegate unquote(op)(out, tensor), to: Elementwise
  end

  for op <- Elementwise.binary_ops() do
    @impl true
    defdelegate unquote(op)(out, left, right), to: Elementwise
  end

  @impl true
  defdelegate select(out, pred, on_true, on_false), to: Elementwise
  @impl true
  defdelegate clip(out, tensor, min, max), to: Elementwise

  # ---- types and shapes ----
  @impl true
  defdelegate as_type(out, tensor), to: Shape
  @impl true
  defdelegate bitcast(out, tensor), to: Shape
  @impl true
  defdelegate reshape(out, tensor), to: Shape
  @impl true
  defdelegate squeeze(out, tensor, axes), to: Shape
  @impl true
  defdelegate broadcast(out, tensor, shape, axes), to: Shape
  @impl true
  defdelegate transpose(out, tensor, axes), to: Shape
  @impl true
  defdelegate pad(out, tensor, pad_value, config), to: Shape
  @impl true
  defdelegate reverse(out, tensor, axes), to: Shape
  @impl true
  defdelegate slice(out, tensor, starts, lengths, strides), to: Shape
  @impl true
  defdelegate put_slice(out, tensor, starts, slice), to: Shape
  @impl true
  defdelegate concatenate(out, tensors, axis), to: Shape
  @impl true
  defdelegate stack(out, tensors, axis), to: Shape

  # ---- reductions and contractions ----
  @impl true
  defdelegate sum(out, tensor, opts), to: Reduction
  @impl true
  defdelegate product(out, tensor, opts), to: Reduction
  @impl true
  defdelegate reduce_max(out, tensor, opts), to: Reduction
  @impl true
  defdelegate reduce_min(out, tensor, opts), to: Reduction
  @impl true
  defdelegate all(out, tensor, opts), to: Reduction
  @impl true
  defdelegate any(out, tensor, opts), to: Reduction
  @impl true
  defdelegate argmax(out, tensor, opts), to: Reduction
  @impl true
  defdelegate argmin(out, tensor, opts), to: Reduction
  @impl true
  defdelegate reduce(out, tensor, acc, opts, fun), to: Reduction
  @impl true
  defdelegate dot(out, left, contract_left, batch_left, right, contract_right, batch_right),
    to: Reduction

  # ---- indexing and sorting ----
  @impl true
  defdelegate gather(out, tensor, indices, opts), to: Indexing
  @impl true
  defdelegate indexed_add(out, tensor, indices, updates, opts), to: Indexing
  @impl true
  defdelegate indexed_put(out, tensor, indices, updates, opts), to: Indexing
  @impl true
  defdelegate sort(out, tensor, opts), to: Indexing
  @impl true
  defdelegate argsort(out, tensor, opts), to: Indexing

  # ---- windows ----
  @impl true
  defdelegate window_sum(out, tensor, window, opts), to: Window
  @impl true
  defdelegate window_product(out, tensor, window, opts), to: Window
  @impl true
  defdelegate window_max(out, tensor, window, opts), to: Window
  @impl true
  defdelegate window_min(out, tensor, window, opts), to: Window
  @impl true
  defdelegate window_reduce(out, tensor, acc, window, opts, fun), to: Window
  @impl true
  defdelegate window_scatter_max(out, tensor, source, init_value, window, opts), to: Window
  @impl true
  defdelegate window_scatter_min(out, tensor, source, init_value, window, opts), to: Window

  # ---- convolution, linear algebra, Fourier transforms ----
  @impl true
  defdelegate conv(out, tensor, kernel, opts), to: Conv
  @impl true
  defdelegate triangular_solve(out, a, b, opts), to: LinAlg
  @impl true
  defdelegate fft(out, tensor, opts), to: FFT
  @impl true
  defdelegate ifft(out, tensor, opts), to: FFT

  # ---- blocks ----
  @impl true
  defdelegate block(struct, out, args, fun), to: Block
end
