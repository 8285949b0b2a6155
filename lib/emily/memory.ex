defmodule Emily.Memory do
  @moduledoc """
  The engine allocator's counters and controls.

  Buffers are 64-byte aligned and come from a size-bucketed cache: freed
  buffers go to the cache and are reused. `active` counts live buffers,
  `cache` the cached ones, `peak` the highest `active` since start or the
  last `reset_peak/0`. The counters are per device; this build has one,
  `:cpu` (`stats/1`).

  ## Resource binaries and the BEAM's accounting

  `Emily.to_binary/1` returns a *resource binary* that aliases the engine's
  buffer (no copy). The BEAM accounts it at the size of its ProcBin (about
  64 bytes), not at the size of the buffer, so a process that reads many
  large tensors in a loop grows its engine memory much faster than its heap
  suggests, and the BEAM may not collect it soon enough to give the buffers
  back. The binaries are freed when the last process holding them is
  collected. Mitigations (each is tested in `test/emily/soak_test.exs`):

    * run `:erlang.garbage_collect/0` every few iterations of such a loop;
    * read in a short-lived process (a `Task`): its heap, and with it every
      binary it held, goes when it exits;
    * copy what must be kept with `:binary.copy/1`: the copy is an ordinary
      BEAM binary and the engine buffer is released with the resource.

  The same holds for tensors: an evaluated intermediate keeps its buffer
  while any process holds its ref. So after each read (`Emily.eval/1`,
  `Emily.to_binary/1` and the `Emily.Backend` reads built on them), when the
  engine's active bytes grew by more than the `:gc_threshold` application
  setting since the reading process last collected, that process collects
  (default 256 MiB; `config :emily, gc_threshold: :infinity` turns it off).
  Eager code over large tensors then reuses cached buffers instead of
  piling up gigabytes of dead intermediates; `Emily.Compiler` avoids the
  question, since a program replay's intermediates are never seen by Elixir.
  """

  alias Emily.Native

  @type stats :: %{
          active: non_neg_integer(),
          peak: non_neg_integer(),
          cache: non_neg_integer(),
          limit: non_neg_integer()
        }

  @doc """
  The allocator counters in bytes: `%{active, peak, cache, limit}` (`limit` is
  0 when there is none). Emits `[:emily, :memory, :stats]` with `active`,
  `peak` and `cache` as measurements and `%{device: :cpu}` as metadata.
  """
  @spec stats() :: stats()
  def stats, do: stats(:cpu)

  @doc """
  The counters of one device, as `stats/0`: `:cpu`, or `:gpu` /
  `{:gpu, i}` when the CUDA backend is available (else `ArgumentError`).
  """
  @spec stats(Emily.Device.t()) :: stats()
  def stats(device) do
    index = check_device!("stats", device)
    stats = if index == 0, do: Native.memory_stats(), else: Native.device_memory_stats(index)
    Emily.Telemetry.execute([:emily, :memory, :stats], Map.delete(stats, :limit), %{device: device})
    stats
  end

  @doc "Resets `peak` to the current `active` bytes."
  @spec reset_peak() :: :ok
  def reset_peak, do: Native.memory_reset_peak()

  @doc "Frees the allocator's cache. Live tensors are never freed."
  @spec clear_cache() :: :ok
  def clear_cache, do: Native.memory_clear_cache()

  @doc """
  Limits `active + cache` to `bytes` (`:infinity` or 0: no limit). An
  evaluation that would exceed it fails with `RuntimeError` after the cache
  has been emptied. Live buffers are never freed by lowering the limit.
  """
  @spec set_limit(non_neg_integer() | :infinity) :: :ok
  def set_limit(:infinity), do: Native.memory_set_limit(0)

  def set_limit(bytes) when is_integer(bytes) and bytes >= 0 and bytes < 0x1_0000_0000_0000_0000,
    do: Native.memory_set_limit(bytes)

  def set_limit(other) do
    raise ArgumentError,
          "Emily.Memory.set_limit: expected a non-negative integer below 2^64 or :infinity, " <>
            "got: #{inspect(other)}"
  end

  defp check_device!(function, device) do
    Emily.Device.check!("Emily.Memory.#{function}", device)
  end
end
