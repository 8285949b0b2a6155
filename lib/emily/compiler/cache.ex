defmodule Emily.Compiler.Cache do
  @moduledoc false
  # Owns the public ETS table of Emily.Compiler's programs:
  # {cache_key, entry, last_used, hits} rows, and the counters row
  # {:stats, hits_of_evicted_entries, misses, evictions}. Callers read and
  # write it from their own processes; this process only keeps it alive.
  use GenServer

  def start_link(_opts \\ []), do: GenServer.start_link(__MODULE__, :ok, name: __MODULE__)

  @impl true
  def init(:ok) do
    :ets.new(__MODULE__, [
      :set,
      :public,
      :named_table,
      read_concurrency: true,
      write_concurrency: true
    ])

    :ets.insert(__MODULE__, {:stats, 0, 0, 0})
    {:ok, nil}
  end
end
