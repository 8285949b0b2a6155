defmodule Emily.Quantization.GGMLTest do
  # Emily.Quantization.GGML against the golden blocks of
  # test/oracle/golden/ggml_blocks.npz (made by the gguf package's numpy
  # dequantizers, scripts/ggml_golden.py): the native kernels on
  # Emily.Backend and the pure-Nx fallback on Nx.BinaryBackend, eager and
  # under Emily.Compiler.
  use ExUnit.Case, async: true

  alias Emily.Quantization.GGML

  @golden Path.expand("../../oracle/golden/ggml_blocks.npz", __DIR__)
  # name => {weights per block, bytes per block}
  @blocks %{
    q4_0: {32, 18},
    q4_1: {32, 20},
    q5_0: {32, 22},
    q5_1: {32, 24},
    q8_0: {32, 34},
    q4_k: {256, 144},
    q5_k: {256, 176},
    q6_k: {256, 210}
  }

  setup_all do
    golden =
      @golden
      |> File.read!()
      |> Nx.load_numpy_archive!()
      |> Map.new(fn {name, t} -> {name, Nx.backend_transfer(t, Nx.BinaryBackend)} end)

    {:ok, golden: golden}
  end

  # The golden rows [0, n) and their first k weights, on `backend`.
  defp golden_weight(golden, name, n, k, backend) do
    {be, bb} = @blocks[name]
    raw = golden["#{name}_raw"][[0..(n - 1), 0..(div(k, be) * bb - 1)]]
    deq = golden["#{name}_deq"][[0..(n - 1), 0..(k - 1)]]
    raw = Nx.backend_copy(raw, backend)
    {GGML.weight(raw, name, {n, k}), deq}
  end

  defp bits(t), do: t |> Nx.backend_transfer(Nx.BinaryBackend) |> Nx.to_binary()

  test "modes and struct fields" do
    assert GGML.modes() == ~w(q4_0 q4_1 q5_0 q5_1 q8_0 q4_k q5_k q6_k)
    raw = Nx.broadcast(Nx.tensor(0, type: :u8), {3, 144})
    w = GGML.weight(raw, 12, {3, 256})

    assert %Emily.QuantizedWeight{group_size: 256, bits: 4, transpose: true, mode: "q4_k"} = w
    assert GGML.weight(raw[[.., 0..35]], :q4_0, {3, 64}).bits == 4

    q6 = Nx.broadcast(Nx.tensor(0, type: :u8), {3, 210})
    assert GGML.weight(q6, "q6_k", {3, 256}).bits == 6
  end

  test "weight/3 validates the type and the shape" do
    raw = Nx.broadcast(Nx.tensor(0, type: :u8), {2, 18})

    assert_raise ArgumentError, ~r/q4_1 weights \{2, 32\} need raw blocks u8\{2, 20\}/, fn ->
      GGML.weight(raw, :q4_1, {2, 32})
    end

    assert_raise ArgumentError, ~r/multiple of the block of 32/, fn ->
      GGML.weight(raw, :q4_0, {2, 48})
    end

    assert_raise ArgumentError, ~r/not a block format/, fn -> GGML.weight(raw, :q3_k, {2, 32}) end
    assert_raise ArgumentError, ~r/not a block format/, fn -> GGML.weight(raw, 1, {2, 32}) end

    assert_raise ArgumentError, ~r/need raw blocks u8/, fn ->
      GGML.weight(Nx.as_type(raw, :s8), :q4_0, {2, 32})
    end
  end

  test "dequantize is bit-exact with ggml, natively and in pure Nx", %{golden: golden} do
    for name <- Map.keys(@blocks) do
      {w, want} = golden_weight(golden, name, 8, 512, Emily.Backend)
      native = GGML.dequantize(w)
      assert native.data.__struct__ == Emily.Backend
      assert bits(native) == Nx.to_binary(want), "#{name} native"

      {wb, _} = golden_weight(golden, name, 8, 512, Nx.BinaryBackend)
      composed = GGML.dequantize(wb)
      assert composed.data.__struct__ == Nx.BinaryBackend
      assert Nx.to_binary(composed) == Nx.to_binary(want), "#{name} pure Nx"

      assert bits(GGML.dequantize(w, :f64)) == Nx.to_binary(Nx.as_type(want, :f64))
      assert bits(GGML.dequantize(w, :f16)) == Nx.to_binary(Nx.as_type(want, :f16))
    end
  end

  defp assert_close(got, want, k) do
    got = Nx.backend_transfer(got, Nx.BinaryBackend) |> Nx.as_type(:f64)
    want = Nx.as_type(want, :f64)
    scale = want |> Nx.abs() |> Nx.reduce_max() |> Nx.to_number()
    err = Nx.subtract(got, want) |> Nx.abs() |> Nx.reduce_max() |> Nx.to_number()
    assert err <= 4 * k * 2.0e-7 * max(scale, 1.0), "error #{err} (scale #{scale})"
  end

  test "quantized_matmul: native vs the pure-Nx fallback", %{golden: golden} do
    key = Nx.Random.key(7)

    for name <- Map.keys(@blocks), m <- [1, 2, 17] do
      k = 512
      {x, _} = Nx.Random.normal(key, shape: {m, k}, type: :f32)
      x = Nx.backend_copy(x, Nx.BinaryBackend)
      {w, deq} = golden_weight(golden, name, 8, k, Emily.Backend)
      {wb, _} = golden_weight(golden, name, 8, k, Nx.BinaryBackend)

      native = GGML.quantized_matmul(Nx.backend_copy(x, Emily.Backend), w)
      assert native.shape == {m, 8} and native.type == {:f, 32}
      composed = GGML.quantized_matmul(x, wb)
      assert composed.data.__struct__ == Nx.BinaryBackend

      want = Nx.dot(Nx.as_type(x, :f64), [1], Nx.as_type(deq, :f64), [1])
      assert_close(native, want, k)
      assert_close(composed, want, k)
    end
  end

  test "quantized_matmul keeps x's half type and batch axes", %{golden: golden} do
    {w, deq} = golden_weight(golden, :q6_k, 4, 256, Emily.Backend)
    x = Nx.iota({2, 3, 256}, type: :f32, backend: Emily.Backend) |> Nx.divide(256.0)

    for type <- [:f16, :bf16] do
      y = GGML.quantized_matmul(Nx.as_type(x, type), w)
      assert y.shape == {2, 3, 4} and y.type == Nx.Type.normalize!(type)

      want =
        Nx.dot(
          Nx.as_type(Nx.backend_transfer(Nx.as_type(x, type), Nx.BinaryBackend), :f64),
          [2],
          Nx.as_type(deq, :f64),
          [1]
        )

      got = Nx.backend_transfer(y, Nx.BinaryBackend) |> Nx.as_type(:f64)
      rel = if type == :f16, do: 1.0e-3, else: 8.0e-3
      assert Nx.all_close(got, want, rtol: rel, atol: rel) |> Nx.to_number() == 1
    end

    assert_raise ArgumentError, ~r/must end in k = 256/, fn ->
      GGML.quantized_matmul(Nx.iota({2, 128}, type: :f32), w)
    end
  end

  test "under Emily.Compiler: the native kernels inside defn", %{golden: golden} do
    {w, deq} = golden_weight(golden, :q4_k, 8, 512, Emily.Backend)
    x = Nx.iota({2, 512}, type: :f32, backend: Emily.Backend) |> Nx.divide(512.0)

    f = fn x, w -> {GGML.quantized_matmul(Nx.multiply(x, 2.0), w), GGML.dequantize(w)} end
    {y, d} = Nx.Defn.jit(f, compiler: Emily.Compiler).(x, w)
    assert bits(d) == Nx.to_binary(deq)

    want =
      Nx.dot(
        Nx.multiply(Nx.backend_copy(x, Nx.BinaryBackend), 2.0) |> Nx.as_type(:f64),
        [1],
        Nx.as_type(deq, :f64),
        [1]
      )

    assert_close(y, want, 512)

    # The same function under Nx's evaluator on BinaryBackend runs the fallback.
    {wb, _} = golden_weight(golden, :q4_k, 8, 512, Nx.BinaryBackend)

    {yb, db} =
      Nx.Defn.jit(f, compiler: Nx.Defn.Evaluator).(Nx.backend_copy(x, Nx.BinaryBackend), wb)

    assert Nx.to_binary(db) == Nx.to_binary(deq)
    assert_close(yb, want, 512)
  end
end
