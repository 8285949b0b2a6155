defmodule Emily.Quantization.TransformTest do
  use ExUnit.Case, async: true

  alias Emily.Quantization.{Layers, Transform}
  alias Emily.QuantizedWeight

  defp mlp do
    Axon.input("x", shape: {nil, 128})
    |> Axon.dense(256, activation: :relu, name: "hidden")
    |> Axon.dense(64, activation: :tanh)
    |> Axon.dense(10, use_bias: false, name: "head")
  end

  defp input do
    Nx.iota({3, 128}, type: :f32, backend: Nx.BinaryBackend) |> Nx.multiply(0.173) |> Nx.sin()
  end

  defp init(model) do
    # A fixed seed: the 4-bit error bound below holds for these weights.
    {init_fn, _} = Axon.build(model, compiler: Nx.Defn.Evaluator, seed: 7)
    init_fn.(Nx.template({3, 128}, :f32), Axon.ModelState.empty())
  end

  defp max_rel_error(got, want) do
    got = Nx.backend_copy(got, Nx.BinaryBackend)
    err = Nx.reduce_max(Nx.abs(Nx.subtract(got, want))) |> Nx.to_number()
    err / (Nx.reduce_max(Nx.abs(want)) |> Nx.to_number())
  end

  test "a quantized MLP predicts close to the float one, eagerly and on Emily.Compiler" do
    model = mlp()
    state = init(model)
    {_, predict} = Axon.build(model, compiler: Nx.Defn.Evaluator)
    want = predict.(state, input())

    for bits <- [8, 4], transpose <- [true, false] do
      {qmodel, qstate} =
        Transform.quantize(model, state, bits: bits, group_size: 64, transpose: transpose)

      assert %QuantizedWeight{bits: ^bits, transpose: ^transpose} =
               qstate.data["hidden"]["kernel"]

      # head's 10 outputs are no multiple of 64: quantized along its 64
      # inputs when transposed, left dense otherwise
      if transpose,
        do: assert(%QuantizedWeight{} = qstate.data["head"]["kernel"]),
        else: assert(%Nx.Tensor{} = qstate.data["head"]["kernel"])

      assert %QuantizedWeight{} = qstate.data["dense_1"]["kernel"]
      # biases stay dense; the quantized layers are frozen
      assert %Nx.Tensor{} = qstate.data["hidden"]["bias"]
      assert Axon.ModelState.frozen_parameters(qstate) |> Map.has_key?("hidden")

      {_, qpredict} = Axon.build(qmodel, compiler: Emily.Compiler)
      got = qpredict.(qstate, Nx.backend_copy(input(), Emily.Backend))
      assert %Emily.Backend{} = got.data
      tol = if bits == 8, do: 0.02, else: 0.15
      assert max_rel_error(got, want) < tol, "bits #{bits}: #{max_rel_error(got, want)}"

      # the same quantized model on the Evaluator and Nx.BinaryBackend (the blocks' fallback)
      {_, bpredict} = Axon.build(qmodel, compiler: Nx.Defn.Evaluator)
      binary_state = Nx.backend_copy(qstate, Nx.BinaryBackend)
      fallback = bpredict.(binary_state, input())
      assert max_rel_error(got, fallback) < 1.0e-4
    end
  end

  test "except leaves the named layers dense" do
    model = mlp()
    state = init(model)
    {qmodel, qstate} = Transform.quantize(model, state, group_size: 64, except: ["head"])
    assert %Nx.Tensor{} = qstate.data["head"]["kernel"]
    assert %QuantizedWeight{} = qstate.data["hidden"]["kernel"]
    {_, predict} = Axon.build(model, compiler: Nx.Defn.Evaluator)
    {_, qpredict} = Axon.build(qmodel, compiler: Emily.Compiler)
    got = qpredict.(qstate, Nx.backend_copy(input(), Emily.Backend))
    assert max_rel_error(got, predict.(state, input())) < 0.15
  end

  test "a rewritten model initialises dense kernels, then its state is quantized" do
    qmodel = Transform.quantize_dense_layers(mlp(), group_size: 64)
    state = init(qmodel)
    assert %Nx.Tensor{shape: {128, 256}} = state.data["hidden"]["kernel"]
    {_, qpredict} = Axon.build(qmodel, compiler: Nx.Defn.Evaluator)
    {_, predict} = Axon.build(mlp(), compiler: Nx.Defn.Evaluator)
    dense_out = qpredict.(state, input())
    assert max_rel_error(dense_out, predict.(state, input())) < 1.0e-6

    qstate = Transform.quantize_model_state(qmodel, state, group_size: 64, bits: 8)
    assert %QuantizedWeight{group_size: 64, bits: 8} = qstate.data["hidden"]["kernel"]
    assert max_rel_error(qpredict.(qstate, input()), dense_out) < 0.02
  end

  test "Layers.quantized_dense is a drop-in for weight_only_quantized_dense" do
    kernel = Nx.iota({128, 32}, type: :f32) |> Nx.multiply(0.01) |> Nx.cos()
    bias = Nx.iota({32}, type: :f32)
    qw = QuantizedWeight.from_dense(Nx.backend_copy(Nx.transpose(kernel), Emily.Backend), bits: 8)
    # the kernel the quantized weight stands for, [in, out]
    dense =
      qw |> QuantizedWeight.to_dense() |> Nx.transpose() |> Nx.backend_copy(Nx.BinaryBackend)

    x = Nx.backend_copy(input(), Emily.Backend)
    want = Nx.add(Nx.dot(input(), dense), bias)
    got = Layers.quantized_dense(x, qw, Nx.backend_copy(bias, Emily.Backend))
    assert max_rel_error(got, want) < 1.0e-5
    # bias omitted, opts in its place; an f16 input is converted to the scales' type
    y = Layers.quantized_dense(Nx.as_type(x, :f16), qw, mode: :inference)
    assert y.type == {:f, 32}
    assert max_rel_error(y, Nx.dot(input(), dense)) < 0.02
    assert_raise ArgumentError, ~r/invalid bias/, fn -> Layers.quantized_dense(x, qw, :nope) end
  end
end
