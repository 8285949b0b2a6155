defmodule Emily do
  @moduledoc """
  Elixir bindings to libemily, a lazy tensor engine written in C.

  Most users do not call this module directly. `Emily.Backend` plugs
  Emily into `Nx` so every `Nx.*` op runs on the engine, and
  `Emily.Compiler` (an `Nx.Defn.Compiler`) turns `defn` into engine
  programs. The functions below exist for diagnostics and low-level binary
  round-tripping: build an engine tensor from a raw buffer, read it back,
  inspect shape / dtype, and force a flush of the lazy graph.

  ## Public API

    * `from_binary/3` — BEAM binary → engine tensor reference.
    * `to_binary/1` — engine tensor reference → BEAM binary. Triggers
      evaluation and emits a `[:emily, :to_binary, *]` telemetry span.
    * `shape/1`, `dtype/1` — metadata without triggering evaluation.
    * `eval/1` — force the lazy graph to materialise (useful for
      benchmarking and telemetry). Emits `[:emily, :eval, *]`.
    * `async_eval/1` — schedule evaluation without waiting for it. Emits
      `[:emily, :async_eval, *]`.

  The everyday integration points are `Emily.Backend`, `Emily.Compiler`,
  and `Emily.Stream`; see each module's moduledoc for details.

  ## Debug assertions

  Emily supports two compile-time flags that enable runtime assertions
  on hot paths. Both default to `false` with zero runtime cost — the
  guarded branches are dead-code-eliminated by the Elixir compiler
  when the flag is `false`.

      # config/dev.exs  (opt in only in development / CI)
      import Config
      config :emily,
        debug_bounds_check: true,
        debug_detect_nan_inf: true

    * `:debug_bounds_check` — assert indices are in range for
      `gather`, `take`, `take_along_axis`, `indexed_add`, and
      `indexed_put`. Raises `ArgumentError` on out-of-range or
      negative indices. The engine itself never reads or writes out of
      bounds (it clamps indices into range), but a clamped index still
      silently picks the wrong element, which can surface much later as
      `NaN` scores or a wrong answer. Turning this on in CI catches the
      bug class at the offending op.

    * `:debug_detect_nan_inf` — scan results of `matmul` and of the
      fused kernels that opt in (`Emily.Fast`'s normalisations and
      attention) for NaN/Inf. Raises `ArgumentError` on detection. Useful
      during training so numerics failures surface at the op that produced
      them rather than downstream as `loss = NaN`.

  Each assertion forces a small reduction plus a scalar readback on the
  stream's worker — a sync point that breaks lazy-graph fusion and adds
  noticeable overhead. Leave the flags off in release builds.
  """

  alias Emily.Native

  @typedoc "A dtype as an `{atom, bits}` tuple, e.g. `{:f, 32}` or `{:s, 64}` (`{:pred, 8}` for booleans)."
  @type dtype() :: {:u | :s | :f | :bf | :c | :pred, pos_integer()}

  @typedoc "An opaque reference to an engine tensor."
  @opaque t() :: reference()

  @debug_bounds_check Application.compile_env(:emily, :debug_bounds_check, false)
  @debug_detect_nan_inf Application.compile_env(:emily, :debug_detect_nan_inf, false)

  @doc """
  Build a lazy engine tensor from a raw binary.

  The binary must contain exactly `product(shape) * byte_size(dtype)`
  bytes in native-endian layout. Small binaries are copied; a large one
  (64 KiB or more, suitably aligned) is aliased without a copy and kept
  alive by the tensor. Either way the binary need not be kept by the
  caller.

  Raises `ArgumentError` for a wrong byte size, a negative dimension, a
  byte size that overflows, more than 16 axes or an unknown dtype.

  ## Examples

      iex> t = Emily.from_binary(<<1.0::float-32-native>>, [1], {:f, 32})
      iex> Emily.to_binary(t)
      <<1.0::float-32-native>>

  """
  @spec from_binary(binary(), [non_neg_integer()], dtype()) :: t()
  def from_binary(binary, shape, dtype), do: Native.from_binary(binary, shape, dtype)

  @doc """
  Materialize the tensor and return its raw bytes.

  Triggers evaluation of the underlying graph on the current stream (see
  `Emily.Stream`); blocks the calling process — not its scheduler — until
  the result is ready. The returned binary is a BEAM resource binary
  aliasing the engine's buffer directly — no extra memcpy. It stays alive
  as long as any process holds a reference.

  The binary is safe to read as immutable: reading pins the buffer, which
  disqualifies it from the engine's buffer-donation optimisation (the only
  path by which the engine writes into an existing buffer). The engine is
  otherwise functional — ops produce fresh arrays.

  Emits a `[:emily, :to_binary, :start | :stop | :exception]` telemetry
  span with `:shape` and `:dtype` metadata; `:stop` adds `:byte_size`.

  > #### Memory accounting {: .warning}
  >
  > The BEAM binary heap accounts the resource binary at the size of
  > the ProcBin (~64 bytes), not the size of the aliased engine buffer.
  > In a tight loop calling `to_binary/1` on large tensors, the BEAM
  > may not GC aggressively enough to release the underlying engine
  > storage in a timely fashion — active engine memory can grow well
  > beyond what the binary heap suggests.
  >
  > Mitigations:
  >
  >   * Force a collection periodically with `:erlang.garbage_collect/0`.
  >   * Let the binary escape to a short-lived process where GC runs
  >     naturally on exit.
  >   * Materialise to a fresh BEAM-owned binary with
  >     `:binary.copy/1` if you only need the bytes briefly.

  ## Examples

      iex> t = Emily.from_binary(<<1.0::float-32-native>>, [1], {:f, 32})
      iex> Emily.to_binary(t)
      <<1.0::float-32-native>>

  """
  @spec to_binary(t()) :: binary()
  def to_binary(tensor) do
    metadata =
      try do
        %{shape: Native.shape(tensor), dtype: Native.dtype(tensor)}
      rescue
        # The metadata NIFs name themselves; a bad argument is to_binary's.
        e in ArgumentError ->
          reraise ArgumentError,
                  [message: String.replace_prefix(e.message, "shape: ", "to_binary: ")],
                  __STACKTRACE__
      end

    Emily.Telemetry.span([:emily, :to_binary], metadata, fn ->
      binary = Native.await(Native.to_binary(Emily.Stream.current(), tensor))
      {binary, Map.put(metadata, :byte_size, byte_size(binary))}
    end)
  end

  @doc """
  Return the tensor's shape as a list of non-negative ints.

  Reads the lazy-graph metadata; does not trigger evaluation.

  ## Examples

      iex> t = Emily.from_binary(<<0::32, 0::32, 0::32, 0::32>>, [2, 2], {:f, 32})
      iex> Emily.shape(t)
      [2, 2]

  """
  @spec shape(t()) :: [non_neg_integer()]
  def shape(tensor), do: Native.shape(tensor)

  @doc """
  Return the tensor's dtype as an `{atom, bits}` tuple.

  Reads the lazy-graph metadata; does not trigger evaluation.

  ## Examples

      iex> t = Emily.from_binary(<<1.0::float-32-native>>, [1], {:f, 32})
      iex> Emily.dtype(t)
      {:f, 32}

  """
  @spec dtype(t()) :: dtype()
  def dtype(tensor), do: Native.dtype(tensor)

  @doc """
  Force evaluation of the lazy graph rooted at `tensor`.

  Useful for benchmarking or flushing pending work before observing
  side effects. `to_binary/1` implicitly evaluates. Runs on the current
  stream's worker thread and waits for it. Emits a
  `[:emily, :eval, :start | :stop | :exception]` telemetry span.

  ## Examples

      iex> a = Nx.tensor([1.0, 2.0, 3.0], backend: Emily.Backend)
      iex> b = a |> Nx.multiply(2.0) |> Nx.add(1.0)
      iex> Emily.eval(b.data.ref)
      :ok

  """
  @spec eval(t()) :: :ok
  def eval(tensor) do
    Emily.Telemetry.span([:emily, :eval], %{}, fn ->
      {Native.await(Native.eval(Emily.Stream.current(), [tensor])), %{}}
    end)
  end

  @doc """
  Schedule evaluation of `tensors` *without* blocking.

  Hands the lazy graphs to the current stream's queue and returns as soon
  as the work is enqueued — not when it finishes (contrast `eval/1`, which
  waits). This lets a caller keep dispatching the next step's ops while the
  worker computes the current one; block only when you actually read a
  value on the host (`to_binary/1` / `eval/1`). Pass every output of a step
  (e.g. logits plus all KV-cache buffers) in one call. A failure is
  reported by the next `eval/1` or `to_binary/1` on the same stream.
  Emits a `[:emily, :async_eval, *]` telemetry span.

  ## Examples

      iex> a = Nx.tensor([1.0, 2.0, 3.0], backend: Emily.Backend)
      iex> b = a |> Nx.multiply(2.0) |> Nx.add(1.0)
      iex> Emily.async_eval([b.data.ref])
      :ok

  """
  @spec async_eval([t()]) :: :ok
  def async_eval(tensors) when is_list(tensors) do
    Emily.Telemetry.span([:emily, :async_eval], %{}, fn ->
      {Native.async_eval(Emily.Stream.current(), tensors), %{}}
    end)
  end

  def async_eval(other) do
    raise ArgumentError, "async_eval: expected a list of tensors, got: #{inspect(other)}"
  end

  # ---- checked entry points for Emily.Backend (see the debug flags above) ---
  #
  # The ops that the debug flags cover. With a flag off, its `if` is removed
  # at compile time and the function is a plain call to Emily.Native.

  @doc false
  def gather(tensor, indices, axes) do
    if @debug_bounds_check do
      Emily.Debug.check_index_rows!(:gather, tensor, indices, axes)
    end

    Native.gather(tensor, indices, axes)
  end

  @doc false
  def take(tensor, indices, axis) do
    if @debug_bounds_check do
      Emily.Debug.check_indices!(:take, tensor, indices, axis)
    end

    Native.take(tensor, indices, axis)
  end

  @doc false
  def take_along_axis(tensor, indices, axis) do
    if @debug_bounds_check do
      Emily.Debug.check_indices!(:take_along_axis, tensor, indices, axis)
    end

    Native.take_along_axis(tensor, indices, axis)
  end

  @doc false
  def indexed_add(tensor, indices, updates, axes) do
    if @debug_bounds_check do
      Emily.Debug.check_index_rows!(:indexed_add, tensor, indices, axes)
    end

    Native.indexed_add(tensor, indices, updates, axes)
  end

  @doc false
  def indexed_put(tensor, indices, updates, axes) do
    if @debug_bounds_check do
      Emily.Debug.check_index_rows!(:indexed_put, tensor, indices, axes)
    end

    Native.indexed_put(tensor, indices, updates, axes)
  end

  @doc false
  def matmul(left, right) do
    result = Native.matmul(left, right)

    if @debug_detect_nan_inf do
      Emily.Debug.check_finite!(:matmul, result)
    end

    result
  end

  @doc false
  # For fused kernels built elsewhere (Emily.Fast): scans `result` when
  # :debug_detect_nan_inf is on, returns it unchanged otherwise.
  def check_finite(op, result) do
    if @debug_detect_nan_inf do
      Emily.Debug.check_finite!(op, result)
    end

    result
  end
end
