# Peer nodes for the Emily.Distributed tests (loaded by the test files
# that need them, not compiled into the application).
#
# The test VM starts distribution itself (epmd is started when missing),
# then starts peers on 127.0.0.1 with OTP's :peer, with this VM's code
# paths and cookie. Modules defined in test files exist only in this VM:
# `load_module/2` ships their object code to the peers.
defmodule EmilyTest.DistributedPeers do
  @moduledoc false

  def ensure_distributed do
    unless Node.alive?() do
      System.find_executable("epmd") && System.cmd("epmd", ["-daemon"])
      name = :"emily_test_#{System.unique_integer([:positive])}@127.0.0.1"
      {:ok, _} = Node.start(name, :longnames)
    end

    :ok
  end

  # Starts n peers, each with Emily started (stop them with stop_peers/1).
  def start_peers(n) do
    ensure_distributed()
    paths = Enum.flat_map(:code.get_path(), &[~c"-pa", &1])
    cookie = [~c"-setcookie", Atom.to_charlist(Node.get_cookie())]

    for i <- 1..n do
      name = :"emily_peer#{i}_#{System.unique_integer([:positive])}"

      {:ok, pid, node} =
        :peer.start(%{
          name: name,
          host: ~c"127.0.0.1",
          longnames: true,
          # peers stopping one by one must not make :global disconnect
          # the survivors (its overlapping-partitions guard, and its log)
          args:
            paths ++
              cookie ++
              [
                ~c"-connect_all",
                ~c"true",
                ~c"-kernel",
                ~c"prevent_overlapping_partitions",
                ~c"false"
              ]
        })

      {:ok, _} = :erpc.call(node, Application, :ensure_all_started, [:emily])
      {pid, node}
    end
  end

  def stop_peers(peers) do
    for {pid, _node} <- peers do
      try do
        :peer.stop(pid)
      catch
        :exit, _ -> :ok
      end
    end

    :ok
  end

  # Ships a module compiled in this VM (its defmodule result) to nodes.
  def load_module({:module, module, binary, _}, nodes) do
    for node <- nodes do
      {:module, ^module} = :erpc.call(node, :code, :load_binary, [module, ~c"nofile", binary])
    end

    :ok
  end

  # Runs fun.(node) on every node at once; the results in node order.
  def on_all(nodes, fun, timeout \\ 60_000) do
    nodes
    |> Enum.map(fn node -> Task.async(fn -> fun.(node) end) end)
    |> Task.await_many(timeout)
  end
end
