defmodule Emily.Bumblebee.FastKernelsTest do
  # Emily.Bumblebee.FastKernels.apply/1 against the stock graph: the same
  # model with its layer norms (all-MiniLM-L6-v2) or RMS norms (SmolLM2)
  # on Emily.Fast kernels gives the stock outputs to float rounding. The
  # models come from scripts/fetch_models.sh (run by setup); without them
  # the tests are skipped.
  use ExUnit.Case, async: false

  @moduletag :bumblebee
  @models System.get_env("EMILY_MODELS") || Path.expand("~/.cache/emily/models")
  @minilm Path.join(@models, "all-minilm-l6-v2")
  @smollm2 Path.join([@models, "smollm2", "SmolLM2-135M-Instruct.Q4_1.gguf"])

  defp max_rel_error(a, b) do
    [a, b] = Enum.map([a, b], &(&1 |> Nx.backend_copy(Nx.BinaryBackend) |> Nx.as_type(:f64)))
    err = Nx.subtract(a, b) |> Nx.abs() |> Nx.reduce_max() |> Nx.to_number()
    err / (Nx.abs(b) |> Nx.reduce_max() |> Nx.to_number())
  end

  defp predict(model, params, inputs) do
    {_, predict} = Axon.build(model, compiler: Emily.Compiler)
    predict.(params, inputs)
  end

  defp count_ops(model, op_name) do
    model |> Axon.properties() |> Enum.count(fn {_name, op} -> op == op_name end)
  end

  @tag skip:
         if(!File.exists?(Path.join(@minilm, ".complete")),
           do: "all-MiniLM-L6-v2 is not installed"
         )
  test "BERT's layer norms: the hidden states of the stock graph" do
    {:ok, %{model: model, params: params}} =
      Bumblebee.load_model({:local, @minilm}, backend: Emily.Backend)

    fast = Emily.Bumblebee.FastKernels.apply(model)
    assert count_ops(fast, :layer_norm) == count_ops(model, :layer_norm)

    ids = Nx.tensor([[101, 7592, 2088, 2003, 1037, 3231, 1012, 102, 0, 0]])
    inputs = %{"input_ids" => ids, "attention_mask" => Nx.not_equal(ids, 0)}
    want = predict(model, params, inputs).hidden_state
    got = predict(fast, params, inputs).hidden_state
    assert max_rel_error(got, want) < 1.0e-5
  end

  @tag skip: if(!File.exists?(@smollm2), do: "SmolLM2 is not installed")
  test "Llama's RMS norms: the logits of the stock graph" do
    {:ok, %{model: model, params: params}} = Emily.Bumblebee.GGUF.load_model(@smollm2)
    fast = Emily.Bumblebee.FastKernels.apply(model)

    ids = Nx.tensor([[1, 4093, 198, 1780, 314, 260, 3575, 282, 4649, 47, 2, 198]])
    inputs = %{"input_ids" => ids, "attention_mask" => Nx.broadcast(1, ids)}
    want = predict(model, params, inputs).logits
    got = predict(fast, params, inputs).logits
    assert max_rel_error(got, want) < 1.0e-4
    assert Nx.to_flat_list(Nx.argmax(got, axis: -1)) == Nx.to_flat_list(Nx.argmax(want, axis: -1))
  end
end
