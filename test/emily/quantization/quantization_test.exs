defmodule Emily.QuantizationTest do
  use ExUnit.Case, async: true

  doctest Emily.Quantization
  doctest Emily.QuantizedWeight

  alias Emily.Quantization
  alias Emily.QuantizedWeight

  @bits [2, 3, 4, 5, 6, 8]

  defp on_emily(t), do: Nx.backend_copy(t, Emily.Backend)
  defp on_binary(t), do: Nx.backend_copy(t, Nx.BinaryBackend)

  defp qw_on_binary(%QuantizedWeight{} = qw),
    do: %{
      qw
      | value: on_binary(qw.value),
        scales: on_binary(qw.scales),
        biases: on_binary(qw.biases)
    }

  # Deterministic, irregular values in about [-1.3, 1.3].
  defp weights(shape, type) do
    i = Nx.iota(shape, type: :f32, backend: Nx.BinaryBackend)

    Nx.add(Nx.sin(Nx.multiply(i, 0.731)), Nx.multiply(Nx.cos(Nx.multiply(i, 1.37)), 0.3))
    |> Nx.as_type(type)
    |> on_emily()
  end

  defp inputs(shape, type) do
    shape
    |> Nx.iota(type: :f32, backend: Nx.BinaryBackend)
    |> Nx.multiply(0.37)
    |> Nx.sin()
    |> Nx.as_type(type)
  end

  defp assert_close(a, b, tol) do
    a = on_binary(a) |> Nx.as_type(:f64)
    b = on_binary(b) |> Nx.as_type(:f64)
    scale = Nx.reduce_max(Nx.abs(b)) |> Nx.to_number()
    err = Nx.reduce_max(Nx.abs(Nx.subtract(a, b))) |> Nx.to_number()
    assert err <= tol * max(scale, 1.0), "max error #{err}, scale #{scale}"
  end

  test "from_dense: shapes, types and options" do
    w = weights({8, 128}, :f32)
    qw = QuantizedWeight.from_dense(w)
    assert %QuantizedWeight{group_size: 64, bits: 4, transpose: true, mode: "affine"} = qw
    assert qw.value.shape == {8, 16} and qw.value.type == {:u, 32}
    assert qw.scales.shape == {8, 2} and qw.biases.type == {:f, 32}

    for bits <- @bits do
      qw = QuantizedWeight.from_dense(w, bits: bits, group_size: 32)
      assert qw.value.shape == {8, div(128 * bits, 32)}
      assert qw.scales.shape == {8, 4}
    end
  end

  test "dequantize (engine) equals dequantize_defn (pure Nx) bit for bit" do
    for type <- [:f32, :f16, :bf16], bits <- @bits do
      qw = QuantizedWeight.from_dense(weights({6, 128}, type), bits: bits, group_size: 32)
      native = Quantization.dequantize(qw)
      assert native.type == Nx.Type.normalize!(type)
      assert %Emily.Backend{} = native.data
      # the pure-Nx unpacking run op by op on Emily
      assert Nx.to_binary(native) == Nx.to_binary(Quantization.dequantize_defn(qw))
      pure = Quantization.dequantize_defn(qw_on_binary(qw))
      assert %Nx.BinaryBackend{} = pure.data

      if type == :bf16 do
        # Nx.BinaryBackend truncates to bf16 where the engine (and MLX)
        # round to nearest, after the product and after the sum: two bf16
        # steps apart at most.
        assert_close(native, pure, 2.0 / 128)
      else
        assert Nx.to_binary(native) == Nx.to_binary(pure), "#{type} #{bits} bits"
      end
    end
  end

  test "to_dense approximates the weights within the quantization step" do
    w = weights({4, 128}, :f32)

    for bits <- @bits do
      qw = QuantizedWeight.from_dense(w, bits: bits, group_size: 32)
      # the error is at most a step, (max - min) / (2^bits - 1)
      step = 2.6 / (Bitwise.bsl(1, bits) - 1)
      assert_close(QuantizedWeight.to_dense(qw), w, step)
    end
  end

  test "quantized_matmul: the engine kernel agrees with the fallback on Nx.BinaryBackend" do
    for bits <- @bits, transpose <- [true, false], m <- [1, 3, 20] do
      w = weights(if(transpose, do: {24, 64}, else: {64, 96}), :f32)
      qw = QuantizedWeight.from_dense(w, bits: bits, group_size: 32, transpose: transpose)
      x = inputs({m, 64}, :f32)
      native = Quantization.quantized_matmul(on_emily(x), qw)
      assert %Emily.Backend{} = native.data
      assert native.shape == {m, if(transpose, do: 24, else: 96)}
      fallback = Quantization.quantized_matmul(x, qw_on_binary(qw))
      assert %Nx.BinaryBackend{} = fallback.data
      assert_close(native, fallback, 1.0e-5)
    end
  end

  test "quantized_matmul in f16 and bf16, batched x" do
    for type <- [:f16, :bf16] do
      qw = QuantizedWeight.from_dense(weights({16, 128}, type), group_size: 64)
      x = inputs({2, 3, 128}, type)
      native = Quantization.quantized_matmul(on_emily(x), qw)
      assert native.shape == {2, 3, 16} and native.type == Nx.Type.normalize!(type)
      fallback = Quantization.quantized_matmul(x, qw_on_binary(qw))
      assert_close(native, fallback, if(type == :f16, do: 4.0e-3, else: 3.0e-2))
    end
  end

  test "under Emily.Compiler the block runs the kernel and matches eager" do
    qw = QuantizedWeight.from_dense(weights({24, 128}, :f32), bits: 3, group_size: 64)
    x = on_emily(inputs({2, 128}, :f32))
    fun = fn x, qw -> Nx.multiply(Quantization.quantized_matmul_defn(x, qw), 2) end
    compiled = Nx.Defn.jit(fun, compiler: Emily.Compiler).(x, qw)
    eager = fun.(x, qw)
    assert_close(compiled, eager, 1.0e-6)
    evaluator = Nx.Defn.jit(fun, compiler: Nx.Defn.Evaluator).(on_binary(x), qw_on_binary(qw))
    assert_close(compiled, evaluator, 1.0e-5)

    deq = Nx.Defn.jit(&Quantization.dequantize/1, compiler: Emily.Compiler).(qw)
    assert Nx.to_binary(deq) == Nx.to_binary(Quantization.dequantize(qw))
  end

  test "the gradient with respect to x is the dense one" do
    w = weights({16, 64}, :f32)
    qw = QuantizedWeight.from_dense(w, bits: 8, group_size: 32)
    dense = Quantization.dequantize(qw)
    x = on_emily(inputs({3, 64}, :f32))

    grad = fn x, qw -> Nx.Defn.grad(x, &Nx.sum(Nx.sin(Quantization.quantized_matmul(&1, qw)))) end
    want = fn x, dense -> Nx.Defn.grad(x, &Nx.sum(Nx.sin(Nx.dot(&1, [1], dense, [1])))) end
    got = Nx.Defn.jit(grad, compiler: Emily.Compiler).(x, qw)
    assert_close(got, Nx.Defn.jit(want, compiler: Emily.Compiler).(x, dense), 1.0e-4)
  end

  test "defn_supported_bits" do
    assert Quantization.defn_supported_bits() == [2, 3, 4, 5, 6, 8]
  end

  test "ArgumentError on bad input" do
    w = weights({4, 64}, :f32)

    assert_raise ArgumentError, ~r/bits must be 2, 3, 4, 5, 6 or 8/, fn ->
      QuantizedWeight.from_dense(w, bits: 7)
    end

    assert_raise ArgumentError, ~r/group_size must be 32, 64 or 128/, fn ->
      QuantizedWeight.from_dense(w, group_size: 16)
    end

    assert_raise ArgumentError, ~r/multiple of group_size 128/, fn ->
      QuantizedWeight.from_dense(w, group_size: 128)
    end

    assert_raise ArgumentError, ~r/rank >= 2/, fn ->
      QuantizedWeight.from_dense(Nx.iota({64}, type: :f32))
    end

    assert_raise ArgumentError, ~r/f32, f16 or bf16/, fn ->
      QuantizedWeight.from_dense(Nx.iota({2, 64}))
    end

    assert_raise ArgumentError, ~r/mode must be "affine"/, fn ->
      QuantizedWeight.from_dense(w, mode: "q4_0")
    end

    assert_raise ArgumentError, ~r/unknown keys/, fn -> QuantizedWeight.from_dense(w, bitz: 4) end

    qw = QuantizedWeight.from_dense(w, group_size: 32)
    x = on_emily(Nx.iota({2, 63}, type: :f32))

    assert_raise ArgumentError, ~r/last axis of x f32\[2, 63\] must be 64/, fn ->
      Quantization.quantized_matmul(x, qw)
    end

    x16 = on_emily(Nx.iota({2, 64}, type: :f16))
    assert_raise ArgumentError, ~r/Nx.as_type/, fn -> Quantization.quantized_matmul(x16, qw) end

    assert_raise ArgumentError, ~r/do not form a quantized weight/, fn ->
      Quantization.dequantize(%{qw | bits: 8})
    end

    unless Code.ensure_loaded?(Emily.Quantization.GGML) do
      assert_raise ArgumentError, ~r/Emily.Quantization.GGML/, fn ->
        Quantization.quantized_matmul(x, %{qw | mode: "q4_0"})
      end
    end
  end
end
