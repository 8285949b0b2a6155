defmodule Emily.Stream do
  @moduledoc """
  Streams: each is a worker thread of the engine with its own FIFO queue.

  Work submitted to one stream runs in order; different streams run
  concurrently. Every process uses the default stream unless it selects
  another with `with_stream/2`, so independent pipelines (say, one per
  serving worker) can run side by side:

      stream = Emily.Stream.new(:cpu)

      Emily.Stream.with_stream(stream, fn ->
        Emily.to_binary(t)
      end)

  Graph building never touches a stream; `Emily.eval/1`,
  `Emily.async_eval/1` and `Emily.to_binary/1` (and everything built on
  them) run on the current one and wait for it without blocking a
  scheduler: the calling process waits in a `receive` for the worker's
  reply.

  ## Lifecycle

    * `new/2` starts a worker thread for a device. `:gpu` (or `{:gpu, i}`)
      is accepted when the CUDA backend loads, and raises `ArgumentError`
      with the reason otherwise (the argument is honoured, never ignored).
    * `close/1` stops accepting work: jobs still queued fail with
      `RuntimeError` ("... the stream was closed"), the job in flight
      finishes, later use raises. It never waits, so it never blocks a
      scheduler, and it is idempotent.
    * A stream that is garbage collected is closed the same way. Its worker
      thread is detached: it exits by itself once its queue has drained,
      and nothing ever joins it on a scheduler.
    * The default stream belongs to a process supervised by the
      application (`Emily.Stream.Default`): it is created at boot with the
      `:worker_queue_limit` setting, cannot be closed with `close/1`, and is
      replaced if its owner restarts. `default/0` returns it.

  A stream handle may be passed to and used from any process.

  ## Application settings

    * `:worker_queue_limit` (default 8192): the most jobs that may wait on a
      stream. A submission to a full queue raises `RuntimeError` ("the queue
      is full") at once rather than blocking.
    * `:await_timeout` (default `:infinity`): milliseconds a process waits
      for a stream's reply before raising `RuntimeError`. The job itself is
      not cancelled; its late reply is a message the process may discard.
  """

  alias Emily.Native

  @enforce_keys [:ref]
  defstruct [:ref, device: :cpu]

  @typedoc "A stream handle."
  @type t :: %__MODULE__{ref: reference(), device: device()}

  @typedoc "A device a stream computes on."
  @type device :: :cpu | :gpu

  @key :emily_stream
  @default_key {__MODULE__, :default}
  @options [:queue_limit]

  @doc """
  Starts a new stream on `device` (`:cpu`, the default).

  Options: `:queue_limit`, the most jobs that may wait on it (default: the
  `:worker_queue_limit` application setting, 8192). `new(opts)` with a
  keyword list is `new(:cpu, opts)`.

  Raises `ArgumentError` for `:gpu` in a build without the CUDA backend,
  for an unknown device and for bad options.

  ## Examples

      iex> stream = Emily.Stream.new(:cpu)
      iex> stream.device
      :cpu
      iex> Emily.Stream.close(stream)
      :ok

  """
  @spec new(device() | keyword(), keyword()) :: t()
  def new(device \\ :cpu, opts \\ [])

  def new(opts, []) when is_list(opts), do: new(:cpu, opts)

  def new(device, opts) do
    check_device!("new", device)

    unless Keyword.keyword?(opts) do
      raise ArgumentError,
            "Emily.Stream.new: options must be a keyword list, got: #{inspect(opts)}"
    end

    case Keyword.keys(opts) -- @options do
      [] ->
        :ok

      unknown ->
        raise ArgumentError,
              "Emily.Stream.new: unknown options #{inspect(unknown)} (known: #{inspect(@options)})"
    end

    limit = Keyword.get_lazy(opts, :queue_limit, &configured_queue_limit/0)

    unless is_integer(limit) and limit >= 1 and limit <= 0x7FFFFFFF do
      raise ArgumentError,
            "Emily.Stream.new: :queue_limit must be a positive integer below 2^31, got: #{inspect(limit)}"
    end

    %__MODULE__{ref: Native.stream_new(limit), device: device}
  end

  @doc false
  # The :worker_queue_limit setting, checked.
  def configured_queue_limit do
    case Application.get_env(:emily, :worker_queue_limit, 8192) do
      limit when is_integer(limit) and limit >= 1 and limit <= 0x7FFFFFFF ->
        limit

      other ->
        raise ArgumentError,
              "Emily.Stream: the :worker_queue_limit setting must be a positive integer, " <>
                "got: #{inspect(other)}"
    end
  end

  @doc false
  # :cpu always; :gpu / {:gpu, i} when the CUDA backend loads (else an
  # ArgumentError that says why).
  def check_device!(function, device) do
    Emily.Device.check!("Emily.Stream.#{function}", device)
    :ok
  end

  @doc """
  The default stream: the one a process uses when it has not selected
  another. It is owned by a process supervised by the application.
  """
  @spec default() :: t()
  def default, do: %__MODULE__{ref: default_ref()}

  @doc """
  Runs `fun` with `stream` as the calling process's stream and returns its
  result. The previous stream is restored afterwards (also when `fun`
  raises), so calls nest. The selection is per process: processes spawned
  by `fun` use the default stream unless they select one too.
  """
  @spec with_stream(t(), (-> result)) :: result when result: term()
  def with_stream(%__MODULE__{ref: ref}, fun) when is_reference(ref) and is_function(fun, 0) do
    previous = Process.put(@key, ref)

    try do
      fun.()
    after
      if previous == nil, do: Process.delete(@key), else: Process.put(@key, previous)
    end
  end

  def with_stream(%__MODULE__{} = stream, fun) when not is_function(fun, 0) do
    raise ArgumentError,
          "Emily.Stream.with_stream: expected a function of arity 0, got: #{inspect(fun)} " <>
            "(stream: #{inspect(stream)})"
  end

  def with_stream(other, _fun) do
    raise ArgumentError,
          "Emily.Stream.with_stream: expected an %Emily.Stream{}, got: #{inspect(other)}"
  end

  @doc """
  Closes `stream`. Jobs still queued fail with `RuntimeError`, the job in
  flight finishes, and later use raises `RuntimeError`. Never blocks;
  idempotent. The default stream cannot be closed (`ArgumentError`).
  """
  @spec close(t()) :: :ok
  def close(%__MODULE__{ref: ref}) when is_reference(ref) do
    if ref == :persistent_term.get(@default_key, nil) do
      raise ArgumentError, "Emily.Stream.close: the default stream cannot be closed"
    end

    Native.stream_close(ref)
  end

  def close(other) do
    raise ArgumentError, "Emily.Stream.close: expected an %Emily.Stream{}, got: #{inspect(other)}"
  end

  @doc """
  Blocks the calling process (not its scheduler) until every job queued
  so far on `stream` (default: the current one) has run, raising the
  failure of an earlier `Emily.async_eval/1`.
  """
  @spec synchronize(t() | nil) :: :ok
  def synchronize(stream \\ nil)
  def synchronize(nil), do: Native.await(Native.synchronize(current()))

  def synchronize(%__MODULE__{ref: ref}) when is_reference(ref),
    do: Native.await(Native.synchronize(ref))

  def synchronize(other) do
    raise ArgumentError,
          "Emily.Stream.synchronize: expected an %Emily.Stream{} or nil, got: #{inspect(other)}"
  end

  @doc false
  # The stream reference Emily.Native takes for the calling process: the
  # one selected with with_stream/2, else the supervised default stream,
  # else nil (the engine's built-in stream, used when the application is
  # not started).
  @spec current() :: reference() | nil
  def current do
    case Process.get(@key) do
      nil -> :persistent_term.get(@default_key, nil)
      ref -> ref
    end
  end

  @doc false
  # The stream selected with with_stream/2 in this process, or nil.
  def selected, do: Process.get(@key)

  @doc false
  def default_ref do
    case :persistent_term.get(@default_key, nil) do
      nil ->
        raise RuntimeError,
              "Emily.Stream.default: the :emily application is not started " <>
                "(its supervisor owns the default stream)"

      ref ->
        ref
    end
  end

  @doc false
  def default_key, do: @default_key
end

defmodule Emily.Stream.Default do
  @moduledoc false
  # Owns the default stream: creates it at boot with the configured queue
  # limit, publishes its reference in :persistent_term (read on every eval
  # for a few nanoseconds, written only here) and closes it on shutdown. If
  # this process restarts, a fresh stream replaces the old one; the old one
  # is closed once nothing references it (its queued jobs then fail with a
  # clear "closed" error).

  use GenServer

  def start_link(opts \\ []), do: GenServer.start_link(__MODULE__, opts, name: __MODULE__)

  @impl true
  def init(_opts) do
    Process.flag(:trap_exit, true)
    ref = Emily.Native.stream_new(Emily.Stream.configured_queue_limit())
    :persistent_term.put(Emily.Stream.default_key(), ref)
    {:ok, ref}
  end

  @impl true
  def terminate(_reason, ref) do
    if :persistent_term.get(Emily.Stream.default_key(), nil) == ref do
      :persistent_term.erase(Emily.Stream.default_key())
    end

    Emily.Native.stream_close(ref)
    :ok
  end
end
