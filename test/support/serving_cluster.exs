Code.require_file("serving_models.exs", __DIR__)

defmodule Emily.ServingCluster do
  @moduledoc false
  # Peer BEAM nodes on the loopback address for the distributed serving test
  # and bench: OTP's :peer, with this node's code paths, the Emily
  # application started, and test/support/serving_models.exs required on
  # each, so every node can start the same servings under the same names.
  # Every call that waits has a bound.

  @models Path.expand("serving_models.exs", __DIR__)
  @host ~c"127.0.0.1"
  @call_timeout 120_000

  @doc """
  Makes this node distributed (a longname on 127.0.0.1) unless it already
  is, starting epmd first when needed. Returns :started when it started
  distribution (the caller stops it with Node.stop/0), :already otherwise.
  """
  def ensure_distributed!(prefix \\ "emily_test") do
    if Node.alive?() do
      :already
    else
      epmd = System.find_executable("epmd") || Path.join([:code.root_dir(), "bin", "epmd"])
      {_, 0} = System.cmd(epmd, ["-daemon"], stderr_to_stdout: true)
      name = :"#{prefix}_#{System.unique_integer([:positive])}@127.0.0.1"

      case Node.start(name, :longnames) do
        {:ok, _} -> :started
        {:error, reason} -> raise "could not start distribution as #{name}: #{inspect(reason)}"
      end
    end
  end

  @doc """
  Starts a peer node (not linked to the caller: a peer that is killed on
  purpose must not take the caller with it) running Emily and the serving
  models' module. Returns {peer_pid, node}.
  """
  def start_peer!(prefix \\ "emily_peer") do
    name = :"#{prefix}_#{System.unique_integer([:positive])}"
    code_paths = Enum.flat_map(:code.get_path(), &[~c"-pa", &1])

    {:ok, pid, node} =
      :peer.start(%{
        name: name,
        host: @host,
        longnames: true,
        args: code_paths,
        wait_boot: 30_000
      })

    {:ok, _} = call(node, Application, :ensure_all_started, [:emily])
    # Peers log errors only: a peer that sees another one killed logs a
    # warning from :global (it disconnects from the dead node to keep the
    # cluster fully connected), which is expected in the node-down test.
    call(node, Logger, :configure, [[level: :error]])
    call(node, Code, :require_file, [@models])
    {pid, node}
  end

  @doc "Starts the servings `kinds` on `node` (see Emily.ServingModels.start_servings/2)."
  def start_servings!(node, kinds, opts \\ []) do
    {:ok, _sup} = call(node, Emily.ServingModels, :start_servings, [kinds, opts])
    :ok
  end

  @doc "Stops a peer; a peer that is already gone is fine."
  def stop_peer(pid) do
    if Process.alive?(pid), do: :peer.stop(pid)
    :ok
  catch
    :exit, _ -> :ok
  end

  @doc "Kills a peer node at once (halt, no cleanup): a machine going down."
  def kill_node(node) do
    :erpc.cast(node, :erlang, :halt, [137, [flush: false]])
  end

  @doc """
  Waits until the serving `name` has exactly the members of `nodes` in
  Nx.Serving's process group as seen from `from` (this node by default),
  at most `timeout` ms. Returns the nodes seen last.
  """
  def await_members!(name, nodes, timeout \\ 30_000, from \\ node()) do
    deadline = System.monotonic_time(:millisecond) + timeout
    want = Enum.sort(nodes)
    await_members(name, want, deadline, from)
  end

  defp await_members(name, want, deadline, from) do
    seen = members(name, from)

    cond do
      seen == want ->
        seen

      System.monotonic_time(:millisecond) > deadline ->
        raise "serving #{inspect(name)} on #{inspect(seen)} from #{inspect(from)}, " <>
                "expected #{inspect(want)}"

      true ->
        Process.sleep(20)
        await_members(name, want, deadline, from)
    end
  end

  # The nodes (with repetition removed) that hold members of the serving's
  # process group: Nx.Serving.PG is the :pg scope Nx.Serving joins.
  defp members(name, from) do
    pids =
      if from == node(),
        do: :pg.get_members(Nx.Serving.PG, name),
        else: call(from, :pg, :get_members, [Nx.Serving.PG, name])

    pids |> Enum.map(&node/1) |> Enum.uniq() |> Enum.sort()
  end

  def call(node, module, fun, args), do: :erpc.call(node, module, fun, args, @call_timeout)
end
