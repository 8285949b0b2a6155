defmodule Emily.Native do
  @moduledoc """
  NIF stubs: one function per engine entry point of `include/emily.h`, and
  no policy.

  Arguments are exactly the engine's: tensors are opaque references, shapes
  and axes are lists of integers, dtypes are `{kind, bits}` tuples
  (`{:pred, 8}` is the engine's boolean type), streams are references or
  `nil` for the default stream. Nothing is promoted, defaulted or
  broadcast here; `Emily.Backend` does that.

  Graph-building functions return a new lazy tensor in microseconds.
  `eval/2`, `to_binary/2` and `synchronize/1` return a reference at once and
  the stream's worker later sends `{ref, result}` to the caller; wait for it
  with `await/1`. `async_eval/2` only enqueues.

  Bad arguments raise `ArgumentError` naming the function and the argument;
  engine failures raise `ArgumentError` (bad input: shapes, dtypes, axes)
  or `RuntimeError` (evaluation, memory, closed stream, full queue) with the
  engine's message.

  The elementwise and reduce functions are generated from
  `include/emily_ops.h`, the same registry the engine and the NIF table are
  generated from:

    * unary ops `op(tensor)`
    * binary ops `op(left, right)`: both inputs share one dtype and
      broadcast; comparisons and logical ops return `{:pred, 8}`
    * reductions `op(tensor, axes, keep_axes)`: `axes` is a list of axes
      (`[]` reduces none), or `nil` for every axis

  `ops/0` lists them with the dtypes each accepts.
  """

  # Several op names (abs, floor, ceil, round) are also Kernel functions.
  import Kernel, except: [abs: 1, floor: 1, ceil: 1, round: 1]

  @on_load :load_nif

  @ops_header Path.expand("../../include/emily_ops.h", __DIR__)
  @external_resource @ops_header

  # Reads the X(name, accepts) entries of each EM_<FAMILY>_OPS(X) list.
  parse_ops = fn text ->
    text
    |> String.split("\n")
    |> Enum.reduce({nil, %{}}, fn line, {family, acc} ->
      family =
        case Regex.run(~r/^#define EM_(\w+)_OPS\(X\)/, line) do
          [_, name] -> name
          nil -> family
        end

      acc =
        Regex.scan(~r/X\((\w+),\s*(\w+)\)/, line)
        |> Enum.reduce(acc, fn [_, op, accepts], acc ->
          Map.update(acc, family, [{op, accepts}], &[{op, accepts} | &1])
        end)

      # A list ends at the first line without a continuation backslash.
      family = if String.ends_with?(String.trim_trailing(line), "\\"), do: family, else: nil
      {family, acc}
    end)
    |> elem(1)
    |> Map.new(fn {family, ops} -> {family, Enum.reverse(ops)} end)
  end

  families = parse_ops.(File.read!(@ops_header))

  to_ops = fn names ->
    Enum.flat_map(names, &Map.fetch!(families, &1))
    |> Enum.map(fn {op, accepts} ->
      {String.to_atom(op), String.to_atom(String.downcase(accepts))}
    end)
  end

  @unary_ops to_ops.(["UNARY"])
  @binary_ops to_ops.(["BINARY_ARITH", "BINARY_PRED"])
  @reduce_ops to_ops.(["REDUCE"])

  if @unary_ops == [] or @binary_ops == [] or @reduce_ops == [] do
    raise CompileError, description: "could not read the op lists of #{@ops_header}"
  end

  @typedoc "An opaque engine array."
  @type tensor :: reference()
  @typedoc "A stream reference, or `nil` for the default stream."
  @type stream :: reference() | nil
  @type dtype :: {:u | :s | :f | :bf | :c | :pred, pos_integer()}
  @type shape :: [non_neg_integer()]
  @type axes :: [integer()]

  @doc """
  The elementwise and reduce ops generated from `include/emily_ops.h`, as
  `%{unary: [{name, accepts}], binary: [...], reduce: [...]}`, in registry
  order. `accepts` is the dtype class (`:numeric`, `:real`, `:floating`,
  `:realfloat`, `:integer`, `:any`).
  """
  def ops, do: %{unary: @unary_ops, binary: @binary_ops, reduce: @reduce_ops}

  @doc false
  def load_nif do
    path = :filename.join(:code.priv_dir(:emily), ~c"emily_nif")

    case :erlang.load_nif(path, 0) do
      :ok ->
        :ok

      {:error, {reason, text}} ->
        # Say what failed and where: the default is a later, unclear
        # "module not available" error.
        message =
          "Emily: could not load the NIF #{path}.so (#{reason}): #{text}. " <>
            "Build it with `mix compile` (it runs `make nif`)."

        :persistent_term.put({__MODULE__, :load_error}, message)
        IO.warn(message, [])
        :ok
    end
  end

  defp nif_error do
    message = :persistent_term.get({__MODULE__, :load_error}, "Emily: the NIF is not loaded")

    :erlang.nif_error(message)
  end

  @doc """
  Waits for the reply to an asynchronous NIF (`eval/2`, `to_binary/2`,
  `synchronize/1`) and returns its result (`:ok` or the binary), raising
  the engine's error.

  `timeout` defaults to the `:await_timeout` application setting
  (`:infinity` unless configured).
  """
  @spec await(reference(), timeout()) :: :ok | binary()
  def await(ref, timeout \\ Application.get_env(:emily, :await_timeout, :infinity)) do
    receive do
      {^ref, :ok} -> relieve_memory_pressure(:ok)
      {^ref, {:ok, binary}} -> relieve_memory_pressure(binary)
      {^ref, {:error, exception}} -> raise traced_read_error(exception)
    after
      timeout ->
        raise RuntimeError, "timed out after #{timeout}ms waiting for the stream's worker"
    end
  end

  # An evaluated tensor's buffer lives as long as its ref, and a ref is a
  # few words on the process heap: the VM cannot see the megabytes behind
  # it, so eager code that drops large intermediates would hold them until
  # the process happens to collect (a 16M-element chain of 8 ops held 2.7
  # GB and ran 20x slower, missing the allocator's cache). After a read,
  # when the engine's active bytes grew by more than the `:gc_threshold`
  # application setting (default 256 MiB; `:infinity` turns this off)
  # since this process last collected, it collects now.
  @gc_mark {__MODULE__, :gc_mark}
  defp relieve_memory_pressure(result) do
    case Application.get_env(:emily, :gc_threshold, 256 * 1024 * 1024) do
      :infinity ->
        result

      threshold ->
        active = memory_stats().active

        case Process.get(@gc_mark) do
          nil ->
            Process.put(@gc_mark, active)

          mark when active - mark > threshold ->
            :erlang.garbage_collect()
            Process.put(@gc_mark, memory_stats().active)

          mark when active < mark ->
            Process.put(@gc_mark, active)

          _ ->
            :ok
        end

        result
    end
  end

  # A read of a graph that contains a placeholder: the user read a traced
  # tensor while a program was being traced. Only failures pay for the check.
  defp traced_read_error(%ArgumentError{message: message} = exception) do
    if String.contains?(message, "placeholder: a traced input has no value") do
      ArgumentError.exception(
        "cannot read a traced tensor inside a compiled function: use " <>
          "Nx.select/3, cond or while for data-dependent control flow, and read " <>
          "the results outside the compiled function " <>
          "(engine: #{message})"
      )
    else
      exception
    end
  end

  defp traced_read_error(exception), do: exception

  # ---- generated from emily_ops.h ------------------------------------------

  for {op, accepts} <- @unary_ops do
    @doc "Elementwise `#{op}` (accepts #{accepts} dtypes)."
    @spec unquote(op)(tensor()) :: tensor()
    def unquote(op)(_tensor), do: nif_error()
  end

  for {op, accepts} <- @binary_ops do
    @doc "Elementwise `#{op}` with broadcasting (accepts #{accepts} dtypes)."
    @spec unquote(op)(tensor(), tensor()) :: tensor()
    def unquote(op)(_left, _right), do: nif_error()
  end

  for {op, accepts} <- @reduce_ops do
    @doc "Reduction `#{op}` over `axes` (`nil`: all) (accepts #{accepts} dtypes)."
    @spec unquote(op)(tensor(), axes() | nil, boolean()) :: tensor()
    def unquote(op)(_tensor, _axes, _keep_axes), do: nif_error()
  end

  # ---- arrays, evaluation, streams, memory ---------------------------------

  @doc "A tensor from native-endian bytes (`em_from_data`, or aliased when large)."
  @spec from_binary(binary(), shape(), dtype()) :: tensor()
  def from_binary(_binary, _shape, _dtype), do: nif_error()

  @doc "Reads a tensor on `stream`; `await/1` returns its bytes (a resource binary)."
  @spec to_binary(stream(), tensor()) :: reference()
  def to_binary(_stream, _tensor), do: nif_error()

  @doc "The shape (no evaluation)."
  @spec shape(tensor()) :: shape()
  def shape(_tensor), do: nif_error()

  @doc "The dtype (no evaluation)."
  @spec dtype(tensor()) :: dtype()
  def dtype(_tensor), do: nif_error()

  @doc "The number of axes."
  @spec ndim(tensor()) :: non_neg_integer()
  def ndim(_tensor), do: nif_error()

  @doc "The number of elements."
  @spec size(tensor()) :: non_neg_integer()
  def size(_tensor), do: nif_error()

  @doc "The number of bytes of the elements."
  @spec nbytes(tensor()) :: non_neg_integer()
  def nbytes(_tensor), do: nif_error()

  @doc "Whether the tensor holds data already."
  @spec is_evaluated(tensor()) :: boolean()
  def is_evaluated(_tensor), do: nif_error()

  @doc "Evaluates `tensors` on `stream`; `await/1` returns `:ok`."
  @spec eval(stream(), [tensor()]) :: reference()
  def eval(_stream, _tensors), do: nif_error()

  @doc "Enqueues evaluation of `tensors` on `stream` and returns `:ok` at once."
  @spec async_eval(stream(), [tensor()]) :: :ok
  def async_eval(_stream, _tensors), do: nif_error()

  @doc "A barrier: `await/1` returns once the jobs queued before it have run."
  @spec synchronize(stream()) :: reference()
  def synchronize(_stream), do: nif_error()

  @doc "A new stream (a worker thread); `queue_limit` 0 means the default (8192)."
  @spec stream_new(non_neg_integer()) :: reference()
  def stream_new(_queue_limit), do: nif_error()

  @doc "Closes a stream: queued jobs fail, later use raises. Idempotent."
  @spec stream_close(reference()) :: :ok
  def stream_close(_stream), do: nif_error()

  @doc "Allocator counters in bytes: `%{active, peak, cache, limit}`."
  @spec memory_stats() :: %{
          active: non_neg_integer(),
          peak: non_neg_integer(),
          cache: non_neg_integer(),
          limit: non_neg_integer()
        }
  def memory_stats, do: nif_error()

  @doc "The tensor moved to a device (0: cpu, 1 + i: gpu i), lazily."
  def to_device(_tensor, _device), do: nif_error()

  @doc "The device number a tensor lives on (0: cpu, 1 + i: gpu i)."
  def array_device(_tensor), do: nif_error()

  @doc """
  The device numbers of a list of tensors, or `:cpu` when all live on the
  CPU (one call: a jitted function asks on every call).
  """
  def array_devices(_tensors), do: nif_error()

  @doc "`:ok` when a device (0: cpu, 1 + i: gpu i) is usable, else `{:error, reason}`."
  def device_available(_device), do: nif_error()

  @doc "Allocator counters of one device, as `memory_stats/0`."
  def device_memory_stats(_device), do: nif_error()

  @doc "Resets the peak counter to the active bytes."
  def memory_reset_peak, do: nif_error()

  @doc "Frees the allocator's cached blocks (never live ones)."
  def memory_clear_cache, do: nif_error()

  @doc "Sets the memory limit in bytes (0: none)."
  def memory_set_limit(_bytes), do: nif_error()

  @doc "The op lists as the engine names them (`em_unary_name` ...)."
  def op_names, do: nif_error()

  # ---- graph building -------------------------------------------------------

  @doc "A 0-d tensor from one element's native-endian bytes."
  def scalar(_bytes, _dtype), do: nif_error()

  @doc "A 0-d tensor holding `number` converted to `dtype`."
  def scalar_f64(_number, _dtype), do: nif_error()

  @doc "A 0-d tensor holding the integer converted to `dtype` (wrapping)."
  def scalar_s64(_integer, _dtype), do: nif_error()

  @doc "`pred ? on_true : on_false`, broadcasting all three."
  def select(_pred, _on_true, _on_false), do: nif_error()

  @doc "`min(max(tensor, min), max)`."
  def clip(_tensor, _min, _max), do: nif_error()

  @doc "Value conversion."
  def as_type(_tensor, _dtype), do: nif_error()

  @doc "Reinterprets the bytes (same element size)."
  def bitcast(_tensor, _dtype), do: nif_error()

  @doc "0, 1, 2, ... along `axis` of `shape`."
  def iota(_shape, _axis, _dtype), do: nif_error()

  @doc "Ones on diagonal `k` of the last two axes."
  def eye(_shape, _k, _dtype), do: nif_error()

  @doc "`value` broadcast to `shape` and converted to `dtype`."
  def full(_value, _shape, _dtype), do: nif_error()

  @doc "New shape with the same size; one entry may be -1."
  def reshape(_tensor, _shape), do: nif_error()

  @doc "Permutes axes: out axis i is the input's axis `axes[i]`."
  def transpose(_tensor, _axes), do: nif_error()

  @doc "Broadcasts to `shape` (a view)."
  def broadcast_to(_tensor, _shape), do: nif_error()

  @doc "Removes the given size-1 axes (all of them for `[]`)."
  def squeeze(_tensor, _axes), do: nif_error()

  @doc "Inserts a size-1 axis."
  def expand_dims(_tensor, _axis), do: nif_error()

  @doc "Strided slice: one start, stop and stride per axis (a view)."
  def slice(_tensor, _start, _stop, _strides), do: nif_error()

  @doc "A copy of `tensor` with `update` written at `start`."
  def put_slice(_tensor, _start, _update), do: nif_error()

  @doc "Joins tensors along `axis`."
  def concatenate(_tensors, _axis), do: nif_error()

  @doc "Reverses the given axes (a view)."
  def reverse(_tensor, _axes), do: nif_error()

  @doc "A row-major contiguous tensor."
  def contiguous(_tensor), do: nif_error()

  @doc "Index of the max along `axis` (`nil`: flattened); `dtype` `nil` is s64."
  def argmax(_tensor, _axis, _keep_axis, _tie_high, _dtype), do: nif_error()

  @doc "Index of the min along `axis` (`nil`: flattened); `dtype` `nil` is s64."
  def argmin(_tensor, _axis, _keep_axis, _tie_high, _dtype), do: nif_error()

  @doc "General contraction as `Nx.dot/6`."
  def dot(_left, _right, _contract_left, _contract_right, _batch_left, _batch_right),
    do: nif_error()

  @doc "Matrix product over the last two axes with broadcast batch axes."
  def matmul(_left, _right), do: nif_error()

  @doc "`Nx.gather`: rows of `indices` address `axes`."
  def gather(_tensor, _indices, _axes), do: nif_error()

  @doc "`Nx.take` along `axis`."
  def take(_tensor, _indices, _axis), do: nif_error()

  @doc "`Nx.take_along_axis`."
  def take_along_axis(_tensor, _indices, _axis), do: nif_error()

  @doc "`Nx.indexed_add` (`axes` `[]`: the first k axes)."
  def indexed_add(_tensor, _indices, _updates, _axes), do: nif_error()

  @doc "`Nx.indexed_put` (`axes` `[]`: the first k axes)."
  def indexed_put(_tensor, _indices, _updates, _axes), do: nif_error()

  @doc "A `{:pred, 8}` scalar: whether every index lies in `[0, bound)`."
  def indices_in_range(_indices, _bound), do: nif_error()

  # ---- sort ops ----

  @doc "Stable sort along `axis` (NaN is the largest value); same shape and dtype."
  def sort(_tensor, _axis, _descending), do: nif_error()

  @doc "The stable sorting permutation along `axis`; `dtype` `nil` is s64."
  def argsort(_tensor, _axis, _descending, _dtype), do: nif_error()

  # ---- shape ops 2 ----

  @doc """
  `Nx.pad`: `low`, `high` and `interior` padding per axis with `value` (a
  one-element tensor of the same dtype); negative `low`/`high` crop.
  """
  def pad(_tensor, _value, _low, _high, _interior), do: nif_error()

  @doc """
  Slice of `sizes` (then `strides`) at the starts held by the 1-D integer
  tensor `starts`, read at evaluation and clamped so the window fits.
  """
  def dynamic_slice(_tensor, _starts, _sizes, _strides), do: nif_error()

  @doc "A copy of `tensor` with `update` written at the clamped starts of the 1-D tensor `starts`."
  def dynamic_put_slice(_tensor, _starts, _update), do: nif_error()

  # ---- diagnostics ----

  @doc "Build and platform facts (compiler, OpenBLAS core and threads, CPU features, CUDA)."
  def build_info, do: nif_error()

  # ---- random ops ----

  @doc "Threefry-2x32 random bits of `shape` (dtype u8/u16/u32/u64) from a u32[2] `key`, laid out as Nx.Random."
  def random_bits(_key, _shape, _dtype), do: nif_error()

  @doc "Threefry-2x32-20 hash of u32 counter pairs (last axis 2) with a u32[2] `key`."
  def threefry2x32(_key, _counters), do: nif_error()

  @doc "Nx.Random's erf_inv (Giles' approximation in double, rounded to the dtype)."
  def random_erf_inv(_tensor), do: nif_error()

  # ---- scan ops ----

  @doc "Cumulative `op` (`:sum`, `:product`, `:max`, `:min`) along `axis`, from the end when `reverse`."
  def scan(_tensor, _op, _axis, _reverse), do: nif_error()

  # ---- linalg ops ----

  @doc "Lower Cholesky factor of Hermitian positive-definite `[..., n, n]` (f32/f64/c64/c128)."
  def cholesky(_tensor), do: nif_error()

  @doc "Inverse of square `[..., n, n]`; singular matrices give NaNs."
  def invert(_tensor), do: nif_error()

  @doc "Determinant of square `[..., n, n]`: shape `[...]`."
  def determinant(_tensor), do: nif_error()

  @doc "`{q, r}` of `[..., m, n]` (`complete`: q `[..., m, m]`, r `[..., m, n]`)."
  def qr(_tensor, _complete), do: nif_error()

  @doc "`{p, l, u}` with `a = p·l·u` for square `[..., n, n]` (p in a's dtype)."
  def lu(_tensor), do: nif_error()

  @doc "`{eigenvalues (ascending), eigenvectors (columns)}` of Hermitian `[..., n, n]`."
  def eigh(_tensor), do: nif_error()

  @doc "`{u, s, vt}` of `[..., m, n]` (f32/f64), s descending."
  def svd(_tensor, _full_matrices), do: nif_error()

  @doc "Solves `a·x = b`, b `[..., n, k]` or `[..., n]`; raises at evaluation when singular."
  def solve(_a, _b), do: nif_error()

  @doc "Solves `op(a)·x = b` (`left_side`) or `x·op(a) = b` with triangular `a`."
  def triangular_solve(_a, _b, _left_side, _lower, _transpose), do: nif_error()

  # ---- fft ops ----

  @doc """
  Discrete Fourier transform along `axis` of length `length` (the input is
  cut or zero padded); `mode` is `:forward`, `:inverse` (1/n scaled),
  `:rfft` (keeps length/2 + 1 entries) or `:irfft` (Hermitian half in, real
  out). Inputs f32/f64/c64/c128. Result parts below `eps` (a float >= 0)
  become 0.0.
  """
  def fft(_tensor, _axis, _length, _mode, _eps), do: nif_error()

  # ---- window ops ----

  @doc """
  Reduces every window (`op` is `:sum`, `:product`, `:max` or `:min`); one
  entry per axis in `window`, `strides`, `pad_low`, `pad_high` and
  `dilations`. Padding holds the reduction's identity; same dtype.
  """
  def window_reduce(_tensor, _op, _window, _strides, _pad_low, _pad_high, _dilations),
    do: nif_error()

  @doc """
  `Nx.window_scatter_max` (`select_max` true) or `_min`: adds each `source`
  element at its window's max (min; ties: last) into an `init_value`-filled
  tensor of the input's shape and source's dtype.
  """
  def window_scatter(_tensor, _source, _init, _select_max, _window, _strides, _low, _high),
    do: nif_error()

  # ---- conv ops ----

  @doc """
  N-d cross-correlation, input `{n, c, spatial...}` and kernel
  `{o, c / feature_groups, spatial...}` of one dtype; one list entry per
  spatial axis. Output `{n / batch_groups, o, spatial...}`.
  """
  def conv(
        _input,
        _kernel,
        _strides,
        _pad_low,
        _pad_high,
        _input_dilation,
        _kernel_dilation,
        _feature_groups,
        _batch_groups
      ),
      do: nif_error()

  # ---- early release and raw pointers (nif_pointer.c) ----

  @doc """
  Drops the tensor's engine reference now (`Nx.backend_deallocate`):
  `:ok`, or `:already_deallocated`. Later uses raise `ArgumentError`.
  """
  @spec deallocate(tensor()) :: :ok | :already_deallocated
  def deallocate(_tensor), do: nif_error()

  @doc "Whether `deallocate/1` released the tensor."
  @spec is_deallocated(tensor()) :: boolean()
  def is_deallocated(_tensor), do: nif_error()

  @doc """
  `{address, byte_size}` of `contiguous`, the evaluated row-major form of
  `tensor`; the address is registered (and the bytes kept alive) for as
  long as `tensor` lives.
  """
  @spec to_pointer(tensor(), tensor()) :: {non_neg_integer(), pos_integer()}
  def to_pointer(_tensor, _contiguous), do: nif_error()

  @doc """
  A new tensor with a copy of the bytes at `address`, which must lie inside
  a live `to_pointer/2` registration of this VM (else `ArgumentError`).
  """
  @spec from_pointer(non_neg_integer(), shape(), dtype()) :: tensor()
  def from_pointer(_address, _shape, _dtype), do: nif_error()

  @doc "A new evaluated tensor with a copy of the bytes of an evaluated row-major one."
  @spec copy(tensor()) :: tensor()
  def copy(_tensor), do: nif_error()
  # ---- programs (Emily.Compiler) ----

  @doc """
  A placeholder: a traced input of `dtype` and `shape` that has no value,
  on `device` (0: the CPU, 1 + i: GPU i), where the program's inputs will be.
  """
  def placeholder(_dtype, _shape, _device), do: nif_error()

  @doc """
  A program from `placeholders` to `outputs` (lists of tensors). `options`:
  `fuse` (a boolean: run the fusion pass) or a map
  `%{fuse: boolean, cuda_graph: boolean}` (`cuda_graph`: replay on a GPU as
  one CUDA graph, see `Emily.Compiler`); `capture_outer`: pending tensors
  older than the placeholders become extra inputs (a loop's closed-over
  values).
  """
  def program_new(_placeholders, _outputs, _options, _capture_outer), do: nif_error()

  @doc "Replays `program` on `inputs`: the list of its outputs, lazy."
  def program_run(_program, _inputs), do: nif_error()

  @doc """
  Counters of a program: `%{nodes_before, nodes_after, cse_merged, constants, ...}`,
  and its CUDA graph: `cuda_graph` (`:off | :pending | :captured | :fallback`),
  `cuda_graph_nodes`, `cuda_graph_replays`, `cuda_graph_bytes`,
  `cuda_graph_reason` (why `:fallback`, else `""`), `cuda_graph_state_inputs`
  (inputs an output aliases: state updated in place), `cuda_graph_in_place`
  (launches that did so), `cuda_graph_bound_inputs` (inputs read in place,
  never copied) and `cuda_graph_captures`.
  """
  def program_stats(_program), do: nif_error()

  @doc "A lazy loop over the `state` tensors with `cond` and `body` programs: the final state."
  def while_loop(_cond, _body, _state), do: nif_error()

  @doc """
  `while_loop/3` whose body gives `ntaps` outputs after the next state,
  the first a hook channel's id (an s64 scalar): after each iteration the
  process that opened that channel receives
  `{:emily_hook, id, site, [tap | ...]}` with the other taps.
  """
  def while_loop_tapped(_cond, _body, _state, _ntaps, _site), do: nif_error()

  @doc """
  Opens a hook channel for the calling process: `{channel, id}` (`id`
  unique while the VM runs). Loops made by `while_loop_tapped/5` whose
  channel input is `id` send their taps here until `hook_channel_close/1`.
  """
  def hook_channel_open, do: nif_error()

  @doc "Stops a hook channel's deliveries (idempotent)."
  def hook_channel_close(_channel), do: nif_error()

  # ---- autodiff ----

  @doc "A fresh node equal to `tensor`: a differentiated input of `vjp/3`."
  def identity(_tensor), do: nif_error()

  @doc "`tensor` unchanged, but no gradient flows through it."
  def stop_gradient(_tensor), do: nif_error()

  @doc """
  Gradients (lazy) of `sum(outputs[k] * cotangents[k])` with respect to each
  tensor of `wrt` (`identity/1` wrappers made before the outputs).
  """
  def vjp(_outputs, _cotangents, _wrt), do: nif_error()

  # ---- Emily.Fast: norms, softmax, RoPE (nif_fast.c) ----

  # weight and bias: a ref of x's dtype and shape {D}, or nil.
  def fast_rms_norm(_x, _weight, _eps), do: nif_error()
  def fast_layer_norm(_x, _weight, _bias, _eps), do: nif_error()
  def fast_softmax(_x, _axis), do: nif_error()
  # offset: a 0-d s32/s64 ref; freqs: a 1-D f32 ref of dims/2 periods, or nil.
  def fast_rope(_x, _offset, _freqs, _dims, _traditional, _base, _scale), do: nif_error()

  @doc """
  The decode path's fused matrix-vector product (`em_fast_linear`):
  `[silu(xn gate^T) *] (xn w^T) [+ residual]`, `xn` x or (norm true) its
  RMS-normed rows `x * rsqrt(mean(x ** 2) + eps) * norm_weight` (nil: no
  weight). x `{..., k}`, w and gate `{n, k}` (a row per output), residual
  `{..., n}`, one float type; f32 accumulation, one rounding. No gradient.
  """
  def fast_linear(_x, _w, _norm, _norm_weight, _eps, _gate, _residual), do: nif_error()

  @doc """
  The decode path's head split (`em_fast_heads`): heads `[first, first +
  count)` of `x` `{b, s, n}` as `{b, count, s, head_dim}`, each RMS-normed
  (norm true; norm_weight `{head_dim}` or nil) and rotated by RoPE at
  position `offset + s` (offset a 0-d s32/s64 ref, or nil: no rotation;
  dims, traditional, base, scale as `fast_rope/7`). With a `cache` ref
  `{b, count, l, head_dim}` of x's type (nil: none), the result is the
  cache with rows `[cache_offset, cache_offset + s)` of each head replaced
  by the computed ones (cache_offset a 0-d s32/s64 ref, clamped into
  `[0, l - s]`; updated in place when nothing else holds the cache). No
  gradient.
  """
  def fast_heads(
        _x,
        _head_dim,
        _first,
        _count,
        _norm,
        _norm_weight,
        _eps,
        _offset,
        _dims,
        _traditional,
        _base,
        _scale,
        _cache,
        _cache_offset
      ),
      do: nif_error()

  # ---- scaled dot-product attention (nif_attention.c) ----

  @doc """
  Fused attention `softmax(scale * q k^T + mask) v`: q `{b, h, lq, d}`, k
  `{b, hkv, lk, d}`, v `{b, hkv, lk, dv}` of one float type (h a multiple of
  hkv; query head i reads KV head `div(i, h / hkv)`). `scale` a float (0.0:
  `1/sqrt(d)`), `causal` a boolean (aligned to the end of the keys), `mask`
  nil, a pred tensor (false = masked) or one of q's type added to the
  scaled scores, broadcastable to `{b, h, lq, lk}`; `sinks` nil or `{h}` of
  q's type. Fully masked rows give 0.
  """
  def sdpa(_q, _k, _v, _scale, _causal, _mask, _sinks), do: nif_error()

  # ---- affine quantization (nif_quant.c) ----

  @doc "MLX affine quantization of `w` along its last axis: `{wq, scales, biases}`."
  def quantize(_w, _group_size, _bits), do: nif_error()

  @doc "The float matrix (of `dtype`) of packed weights with their scales and biases."
  def dequantize(_wq, _scales, _biases, _group_size, _bits, _dtype), do: nif_error()

  @doc "`x @ dequantize(w)^T` (transpose) or `x @ dequantize(w)`, from the packed weights."
  def quantized_matmul(_x, _wq, _scales, _biases, _transpose, _group_size, _bits),
    do: nif_error()

  # ---- ggml block formats (nif_ggml.c) ----

  @doc """
  The `(n, k)` matrix encoded by `raw`, a u8 tensor `(n, bytes per row)` of
  ggml blocks of type number `type` (2 = q4_0 ... 14 = q6_k), as `dtype`
  (f32, f16, bf16 or f64).
  """
  def ggml_dequantize(_raw, _type, _k, _dtype), do: nif_error()

  @doc "`x (..., m, k) @ w^T` for the ggml matrix `w` (`raw`, `type`): `(..., m, n)` in x's type."
  def ggml_matmul(_x, _raw, _type, _k), do: nif_error()

  # ---- weight files: safetensors and GGUF (nif_io.c) ----

  @doc "Maps a safetensors file and checks its header: a file handle (`ArgumentError` naming the fault)."
  def safetensors_open(_path), do: nif_error()

  @doc """
  `{tensors, metadata}` of an open safetensors file: tensors as
  `[{name, dtype_name, dtype | nil, shape}]` in header order (`nil`: a dtype
  the engine lacks), metadata as `[{key, value}]`.
  """
  def safetensors_info(_file), do: nif_error()

  @doc "Tensor `name` of an open safetensors file: an evaluated tensor aliasing the mapped bytes."
  def safetensors_get(_file, _name), do: nif_error()

  @doc "The bytes of tensor `name` of an open safetensors file (any dtype) as a u8 tensor aliasing the mapping."
  def safetensors_get_bytes(_file, _name), do: nif_error()

  @doc "Writes `[{name, tensor}]` and `[{key, value}]` metadata to `path` (via a temporary file)."
  def safetensors_save(_path, _tensors, _metadata), do: nif_error()

  @doc "The `weight_map` of a sharded checkpoint's index JSON: `[{tensor_name, file_name}]`."
  def safetensors_index(_path), do: nif_error()

  @doc "Maps a GGUF file (v2/v3) and checks its header: a file handle."
  def gguf_open(_path), do: nif_error()

  @doc """
  `%{version, alignment, data_offset, metadata: [{key, value}], tensors:
  [{name, shape, ggml_type, type_name, offset, nbytes}]}` of an open GGUF
  file; shapes are row-major (GGUF's dims reversed).
  """
  def gguf_info(_file), do: nif_error()

  @doc """
  `{tensor, ggml_type}` for tensor `name` of an open GGUF file: plain types
  as tensors of their dtype and shape, block types as u8 `{rows, bytes per
  row}` tensors of the raw blocks.
  """
  def gguf_get(_file, _name), do: nif_error()
  # ---- distributed: communicators and collectives (nif_distributed.c) ----

  @doc "A communicator listening on `host` (an IPv4 address string) at a free port: `{comm, port}`."
  def comm_listen(_host), do: nif_error()

  @doc """
  Connects the communicator as `rank` of `size` to the listeners
  `[{host, port}]` (one per rank, this rank's own included); waits for the
  peers (on a dirty I/O scheduler) up to `timeout_ms`.
  """
  def comm_connect(_comm, _rank, _size, _addresses, _timeout_ms), do: nif_error()

  @doc "`{rank, size}` of a communicator (`{0, 0}` until connected)."
  def comm_info(_comm), do: nif_error()

  @doc "Closes a communicator's sockets: later ops on it raise, peers see the close."
  def comm_close(_comm), do: nif_error()

  @doc "The element-wise sum of `x` over every rank (lazy)."
  def all_sum(_x, _comm), do: nif_error()

  @doc "Every rank's `x` concatenated along `axis` in rank order (lazy)."
  def all_gather(_x, _comm, _axis), do: nif_error()

  @doc "Part `rank` (along `axis`, split in size parts) of the sum of `x` over every rank (lazy)."
  def reduce_scatter(_x, _comm, _axis), do: nif_error()

  @doc "Sends `x` to rank `dest` when evaluated; the result is `x` (lazy)."
  def comm_send(_x, _comm, _dest), do: nif_error()

  @doc "Receives a `dtype` tensor of `shape` from rank `source` (lazy)."
  def comm_recv(_comm, _source, _dtype, _shape), do: nif_error()

  @doc "A scalar pred that is computed once every rank has reached the barrier (lazy)."
  def barrier(_comm), do: nif_error()

  @doc "The 128-byte id of a new NCCL clique on `device` (1 + the GPU's index), as a binary."
  def comm_nccl_id(_device), do: nif_error()

  @doc "Joins the NCCL clique `id` as `rank` of `size` on `device` (dirty I/O: waits for every rank)."
  def comm_nccl_new(_device, _rank, _size, _id), do: nif_error()
end
