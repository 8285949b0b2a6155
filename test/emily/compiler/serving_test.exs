defmodule Emily.Compiler.ServingTest do
  use ExUnit.Case, async: false

  import Nx.Defn

  defn scale_and_shift(x), do: x * 2 + 1
  defn keyed(x, offset), do: x + offset

  defp emily?(%Nx.Tensor{data: data}), do: match?(%Emily.Backend{}, data)

  test "Nx.Serving.jit runs on Emily.Compiler inline" do
    serving = Nx.Serving.jit(&scale_and_shift/1, compiler: Emily.Compiler)
    batch = Nx.Batch.stack([Nx.tensor([1.0, 2.0]), Nx.tensor([3.0, 4.0])])
    result = Nx.Serving.run(serving, batch)
    assert emily?(result)
    assert Nx.to_list(result) == [[3.0, 5.0], [7.0, 9.0]]
  end

  test "Nx.Serving.new with Nx.Defn.jit, batch_size and batch keys" do
    serving =
      Nx.Serving.new(
        fn
          :double, opts -> Nx.Defn.jit(&scale_and_shift/1, opts)
          :shift, opts -> Nx.Defn.jit(&keyed(&1, 100), opts)
        end,
        compiler: Emily.Compiler
      )
      |> Nx.Serving.batch_size(4)

    double = Nx.Batch.key(Nx.Batch.stack([Nx.tensor([1.0]), Nx.tensor([2.0])]), :double)
    shift = Nx.Batch.key(Nx.Batch.stack([Nx.tensor([1.0])]), :shift)
    assert Nx.to_list(Nx.Serving.run(serving, double)) == [[3.0], [5.0]]
    assert Nx.to_list(Nx.Serving.run(serving, shift)) == [[101.0]]
  end

  test "a serving process under a supervisor batches concurrent requests" do
    name = :"emily_serving_#{System.unique_integer([:positive])}"
    serving = Nx.Serving.jit(&scale_and_shift/1, compiler: Emily.Compiler)

    start_supervised!(
      {Nx.Serving, serving: serving, name: name, batch_size: 4, batch_timeout: 50}
    )

    tasks =
      for i <- 1..6 do
        Task.async(fn ->
          batch = Nx.Batch.stack([Nx.tensor([i * 1.0, i * 10.0])])
          Nx.Serving.batched_run(name, batch)
        end)
      end

    results = Task.await_many(tasks, 10_000)

    for {result, i} <- Enum.with_index(results, 1) do
      assert Nx.to_list(result) == [[i * 2.0 + 1, i * 20.0 + 1]]
    end
  end
end
