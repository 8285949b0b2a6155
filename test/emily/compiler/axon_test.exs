defmodule Emily.Compiler.AxonTest do
  use ExUnit.Case, async: false

  # An Axon model built for Emily.Compiler predicts what the Evaluator on
  # Nx.BinaryBackend predicts, and a training step's gradients agree.
  defp model do
    Axon.input("x", shape: {nil, 4})
    |> Axon.dense(8, activation: :relu)
    |> Axon.layer_norm()
    |> Axon.dense(3, activation: :softmax)
  end

  defp close?(a, b) do
    a = a |> Nx.backend_copy(Nx.BinaryBackend)
    Nx.to_number(Nx.all_close(a, b, rtol: 1.0e-4, atol: 1.0e-6)) == 1
  end

  test "Axon.build predict on Emily.Compiler matches the Evaluator" do
    {init_fn, predict_fn} = Axon.build(model(), compiler: Nx.Defn.Evaluator)
    x = Nx.iota({2, 4}, type: :f32) |> Nx.divide(8)
    params = init_fn.(Nx.template({2, 4}, :f32), Axon.ModelState.empty())
    expected = predict_fn.(params, x)

    {_init, emily_predict} = Axon.build(model(), compiler: Emily.Compiler)
    got = emily_predict.(params, Nx.backend_copy(x, Emily.Backend))
    assert %Emily.Backend{} = got.data
    assert close?(got, expected)
  end

  test "a categorical cross-entropy gradient through the model matches the Evaluator" do
    model =
      Axon.input("x", shape: {nil, 4})
      |> Axon.dense(8, activation: :tanh)
      |> Axon.dense(3, activation: :softmax)

    {init_fn, predict_fn} = Axon.build(model)
    {x, _} = Nx.Random.normal(Nx.Random.key(3), shape: {2, 4}, type: :f32)
    x = Nx.backend_copy(x, Nx.BinaryBackend)
    y = Nx.tensor([[1.0, 0.0, 0.0], [0.0, 0.0, 1.0]])
    params = init_fn.(Nx.template({2, 4}, :f32), Axon.ModelState.empty())

    # Axon's losses take (y_true, y_pred): given the other way round, log
    # of the one-hot targets' zeros makes the loss Inf and the gradients
    # NaN, on the Evaluator as on Emily.
    loss_grad = fn data, x, y ->
      Nx.Defn.value_and_grad(data, fn data ->
        Axon.Losses.categorical_cross_entropy(y, predict_fn.(%{params | data: data}, x), reduction: :mean)
      end)
    end

    {expected_loss, expected} = Nx.Defn.jit(loss_grad, compiler: Nx.Defn.Evaluator).(params.data, x, y)
    {loss, got} = Nx.Defn.jit(loss_grad, compiler: Emily.Compiler).(params.data, x, y)
    assert close?(loss, expected_loss)

    for {layer, grads} <- expected, {name, g} <- grads do
      assert close?(got[layer][name], g),
             "#{layer}.#{name}: #{inspect(Nx.to_flat_list(got[layer][name]))} vs #{inspect(Nx.to_flat_list(g))}"
    end
  end
end
