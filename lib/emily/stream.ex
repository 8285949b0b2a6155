defmodule Emily.Stream do
  @moduledoc """
  Streams: each is a worker thread of the engine with its own FIFO queue.

  Work submitted to one stream runs in order; different streams run
  concurrently. Every process uses the process-wide default stream unless it
  selects another with `with_stream/2`, so independent pipelines (say, one
  per serving worker) can run side by side:

      stream = Emily.Stream.new()

      Emily.Stream.with_stream(stream, fn ->
        Emily.to_binary(t)
      end)

  Graph building never touches a stream; `Emily.eval/1`,
  `Emily.async_eval/1` and `Emily.to_binary/1` (and everything built on
  them) run on the current one. A stream handle may be used from any
  process. It is closed by `close/1`, or when it is garbage collected.

  Application settings: `:worker_queue_limit` (default 8192: a submission to
  a full queue raises `RuntimeError`) and `:await_timeout` (default
  `:infinity`; milliseconds to wait for a stream's reply before raising).
  """

  alias Emily.Native

  @enforce_keys [:ref]
  defstruct [:ref]

  @typedoc "A stream handle."
  @type t :: %__MODULE__{ref: reference()}

  @key :emily_stream

  @doc """
  Starts a new stream.

  Options: `:queue_limit`, the most jobs that may wait on it (default: the
  `:worker_queue_limit` application setting, 8192).
  """
  @spec new(keyword()) :: t()
  def new(opts \\ []) do
    limit =
      Keyword.get(opts, :queue_limit, Application.get_env(:emily, :worker_queue_limit, 8192))

    unless is_integer(limit) and limit >= 1 do
      raise ArgumentError,
            "Emily.Stream.new: :queue_limit must be a positive integer, got: #{inspect(limit)}"
    end

    %__MODULE__{ref: Native.stream_new(limit)}
  end

  @doc """
  Runs `fun` with `stream` as the calling process's stream and returns its
  result. The previous stream is restored afterwards, so calls nest.
  """
  @spec with_stream(t(), (() -> result)) :: result when result: term()
  def with_stream(%__MODULE__{ref: ref}, fun) when is_function(fun, 0) do
    previous = Process.put(@key, ref)

    try do
      fun.()
    after
      if previous == nil, do: Process.delete(@key), else: Process.put(@key, previous)
    end
  end

  @doc """
  Closes `stream`. Jobs still queued fail with `RuntimeError`, the job in
  flight finishes, and later use raises `RuntimeError`. Idempotent.
  """
  @spec close(t()) :: :ok
  def close(%__MODULE__{ref: ref}), do: Native.stream_close(ref)

  @doc """
  Blocks until every job queued so far on `stream` (default: the current
  one) has run, raising the failure of an earlier `Emily.async_eval/1`.
  """
  @spec synchronize(t() | nil) :: :ok
  def synchronize(stream \\ nil)
  def synchronize(nil), do: Native.await(Native.synchronize(current()))
  def synchronize(%__MODULE__{ref: ref}), do: Native.await(Native.synchronize(ref))

  @doc false
  # The calling process's stream reference, or nil for the default stream
  # (the form Emily.Native takes).
  @spec current() :: reference() | nil
  def current, do: Process.get(@key)
end
