defmodule Emily.Fast.AttentionTest do
  use ExUnit.Case, async: true

  alias Emily.Fast.Attention

  # Deterministic values in [-1, 1], different per `seed`.
  defp data(shape, seed, backend \\ Nx.BinaryBackend, type \\ :f32) do
    shape
    |> Nx.iota(type: :f32, backend: backend)
    |> Nx.multiply(0.37 + seed * 0.11)
    |> Nx.add(seed)
    |> Nx.sin()
    |> Nx.as_type(type)
  end

  defp to_emily(t), do: Nx.backend_copy(t, Emily.Backend)
  defp to_binary(t), do: Nx.backend_copy(t, Nx.BinaryBackend)

  defp assert_close(got, want, tol) do
    got = got |> to_binary() |> Nx.as_type(:f64)
    want = want |> to_binary() |> Nx.as_type(:f64)
    assert got.shape == want.shape
    diff = Nx.subtract(got, want) |> Nx.abs() |> Nx.reduce_max() |> Nx.to_number()
    assert diff <= tol, "max difference #{diff} > #{tol}"
  end

  # The same call on Nx.BinaryBackend (the composed fallback) and on
  # Emily.Backend (the engine kernel).
  defp native_vs_fallback(fun, inputs, tol) do
    want = apply(fun, inputs)
    assert %Nx.BinaryBackend{} = want.data
    got = apply(fun, Enum.map(inputs, &to_emily/1))
    assert %Emily.Backend{} = got.data
    assert_close(got, want, tol)
    got
  end

  @cases [
    # {b, h, hkv, lq, lk, d, dv}
    {1, 2, 2, 5, 5, 8, 8},
    {2, 4, 2, 7, 13, 16, 12},
    {1, 8, 1, 1, 600, 32, 32},
    {1, 4, 2, 3, 300, 24, 24}
  ]

  for type <- [:f32, :bf16], {b, h, hkv, lq, lk, d, dv} <- @cases, causal <- [false, true] do
    @tag type: type
    test "#{type} #{inspect({b, h, hkv, lq, lk, d, dv})} causal #{causal}: native equals fallback" do
      {b, h, hkv, lq, lk, d, dv} =
        {unquote(b), unquote(h), unquote(hkv), unquote(lq), unquote(lk), unquote(d), unquote(dv)}

      {type, tol} = unquote(Macro.escape({type, if(type == :bf16, do: 3.0e-2, else: 2.0e-5)}))
      q = data({b, h, lq, d}, 1, Nx.BinaryBackend, type)
      k = data({b, hkv, lk, d}, 2, Nx.BinaryBackend, type)
      v = data({b, hkv, lk, dv}, 3, Nx.BinaryBackend, type)
      causal = unquote(causal)

      got =
        native_vs_fallback(
          &Attention.scaled_dot_product_attention(&1, &2, &3, causal: causal),
          [q, k, v],
          tol
        )

      assert got.type == Nx.Type.normalize!(type)
      assert got.shape == {b, h, lq, dv}
    end
  end

  test "sinks in every accepted shape, with a scale" do
    q = data({1, 4, 3, 8}, 1)
    k = data({1, 2, 9, 8}, 2)
    v = data({1, 2, 9, 8}, 3)
    sinks = Nx.tensor([0.5, -1.0, 2.0, 0.0])

    for s <- [sinks, Nx.reshape(sinks, {1, 4, 1}), Nx.reshape(sinks, {1, 4, 1, 1})] do
      native_vs_fallback(
        &Attention.scaled_dot_product_attention(&1, &2, &3, sinks: &4, scale: 0.3),
        [q, k, v, s],
        2.0e-5
      )
    end

    # a sink lowers every weight: the output shrinks towards 0
    plain = Attention.scaled_dot_product_attention(to_emily(q), to_emily(k), to_emily(v))

    sunk =
      Attention.scaled_dot_product_attention(to_emily(q), to_emily(k), to_emily(v),
        sinks: to_emily(Nx.broadcast(10.0, {4}))
      )

    assert Nx.to_number(Nx.reduce_max(Nx.abs(sunk))) <
             0.01 * Nx.to_number(Nx.reduce_max(Nx.abs(plain)))
  end

  test "additive and boolean masks, broadcast, with fully masked rows giving 0" do
    q = data({2, 2, 4, 8}, 1)
    k = data({2, 2, 6, 8}, 2)
    v = data({2, 2, 6, 8}, 3)
    # additive {1, 2, 4, 6}: row 0 of head 0 fully -inf
    add =
      data({1, 2, 4, 6}, 4)
      |> Nx.put_slice([0, 0, 0, 0], Nx.broadcast(Nx.Constants.neg_infinity(:f32), {1, 1, 1, 6}))

    got =
      native_vs_fallback(
        &Attention.scaled_dot_product_attention_with_mask(&1, &2, &3, &4),
        [q, k, v, add],
        2.0e-5
      )

    assert got[0][0][0] |> Nx.abs() |> Nx.sum() |> Nx.to_number() == 0.0
    # boolean {4, 6} (u8): row 2 fully masked, combined with causal
    keep =
      Nx.greater(data({4, 6}, 5), -0.3)
      |> Nx.put_slice([2, 0], Nx.broadcast(0, {1, 6}) |> Nx.as_type(:u8))

    got =
      native_vs_fallback(
        &Attention.scaled_dot_product_attention_with_mask(&1, &2, &3, &4, causal: true),
        [q, k, v, keep],
        2.0e-5
      )

    assert got[[.., .., 2]] |> Nx.abs() |> Nx.sum() |> Nx.to_number() == 0.0
    refute got |> Nx.is_nan() |> Nx.any() |> Nx.to_number() == 1
  end

  test "under Emily.Compiler (jit) as under the Evaluator on Nx.BinaryBackend" do
    q = data({1, 4, 6, 16}, 1)
    k = data({1, 2, 6, 16}, 2)
    v = data({1, 2, 6, 16}, 3)

    fun = fn q, k, v ->
      Attention.scaled_dot_product_attention(q, k, v, causal: true) |> Nx.multiply(2)
    end

    want = Nx.Defn.jit_apply(fun, [q, k, v], compiler: Nx.Defn.Evaluator)
    got = Nx.Defn.jit_apply(fun, Enum.map([q, k, v], &to_emily/1), compiler: Emily.Compiler)
    assert %Emily.Backend{} = got.data
    assert_close(got, want, 2.0e-5)
  end

  # One decoding step: the new key/value written into a preallocated cache
  # at a runtime offset, attention over the cache with the positions past
  # the offset masked out by an iota comparison.
  defmodule Decode do
    import Nx.Defn

    defn step(q, k_new, v_new, k_cache, v_cache, offset) do
      k_cache = Nx.put_slice(k_cache, [0, 0, offset, 0], k_new)
      v_cache = Nx.put_slice(v_cache, [0, 0, offset, 0], v_new)
      {_, _, cap, _} = Nx.shape(k_cache)
      mask = Nx.iota({1, 1, 1, cap}, axis: 3) <= offset

      {Emily.Fast.Attention.scaled_dot_product_attention_with_mask(q, k_cache, v_cache, mask),
       k_cache, v_cache}
    end
  end

  test "a decode step over a KV cache written by put_slice at a dynamic offset" do
    cap = 64
    q = data({1, 4, 1, 16}, 1)
    k_new = data({1, 2, 1, 16}, 2)
    v_new = data({1, 2, 1, 16}, 3)
    k_cache = data({1, 2, cap, 16}, 4)
    v_cache = data({1, 2, cap, 16}, 5)

    for offset <- [0, 17, cap - 1] do
      args = [q, k_new, v_new, k_cache, v_cache, Nx.tensor(offset)]
      {want, _, _} = Nx.Defn.jit_apply(&Decode.step/6, args, compiler: Nx.Defn.Evaluator)

      {got, k_after, _} =
        Nx.Defn.jit_apply(&Decode.step/6, Enum.map(args, &to_emily/1), compiler: Emily.Compiler)

      assert_close(got, want, 2.0e-5)
      assert_close(k_after[[.., .., offset]], k_new[[.., .., 0]], 0.0)

      # the same as attention over the first offset + 1 cached positions
      n = offset + 1
      k_used = Nx.put_slice(k_cache, [0, 0, offset, 0], k_new)[[.., .., 0..(n - 1)]]
      v_used = Nx.put_slice(v_cache, [0, 0, offset, 0], v_new)[[.., .., 0..(n - 1)]]
      assert_close(got, Attention.scaled_dot_product_attention(q, k_used, v_used), 2.0e-5)
    end
  end

  test "Nx.Defn.grad through it: Emily.Compiler agrees with the Evaluator" do
    q = data({1, 4, 3, 8}, 1)
    k = data({1, 2, 5, 8}, 2)
    v = data({1, 2, 5, 8}, 3)
    sinks = Nx.tensor([0.3, -0.2, 0.0, 1.0])
    w = data({1, 4, 3, 8}, 6)

    loss = fn q, k, v, sinks, w ->
      Nx.Defn.grad({q, k, v, sinks}, fn {q, k, v, sinks} ->
        Attention.scaled_dot_product_attention(q, k, v, causal: true, sinks: sinks)
        |> Nx.multiply(w)
        |> Nx.sum()
      end)
    end

    want = Nx.Defn.jit_apply(loss, [q, k, v, sinks, w], compiler: Nx.Defn.Evaluator)

    got =
      Nx.Defn.jit_apply(loss, Enum.map([q, k, v, sinks, w], &to_emily/1),
        compiler: Emily.Compiler
      )

    for {g, e} <- Enum.zip(Tuple.to_list(got), Tuple.to_list(want)) do
      assert_close(g, e, 1.0e-5)
      assert Nx.to_number(Nx.sum(Nx.abs(e))) > 0
    end
  end

  test "the engine kernel runs on Emily tensors and declines other types" do
    q = to_emily(data({1, 1, 2, 4}, 1))
    out = Nx.template({1, 1, 2, 4}, :f32)
    s = %Attention{scale: 0.5}
    assert %Nx.Tensor{data: %Emily.Backend{}} = Attention.emily_block(s, out, [q, q, q])
    assert Attention.emily_block(s, Nx.template({1, 1, 2, 4}, {:f, 8}), [q, q, q]) == :fallback
  end

  test "bad inputs raise ArgumentError naming the shapes" do
    q = data({1, 4, 2, 8}, 1)
    k = data({1, 3, 2, 8}, 2)

    assert_raise ArgumentError, ~r/q \{1, 4, 2, 8\}, k \{1, 3, 2, 8\}/, fn ->
      Attention.scaled_dot_product_attention(q, k, k)
    end

    assert_raise ArgumentError, ~r/\{4, 2, 8\}/, fn ->
      Attention.scaled_dot_product_attention(data({4, 2, 8}, 1), k, k)
    end

    k = data({1, 2, 2, 8}, 2)

    assert_raise ArgumentError, ~r/mask of shape \{3, 2\}.*\{1, 4, 2, 2\}/, fn ->
      Attention.scaled_dot_product_attention_with_mask(q, k, k, data({3, 2}, 3))
    end

    assert_raise ArgumentError, ~r/sinks must have shape \{4\}.*got \{2\}/, fn ->
      Attention.scaled_dot_product_attention(q, k, k, sinks: data({2}, 3))
    end

    assert_raise ArgumentError, fn ->
      Attention.scaled_dot_product_attention(q, k, k, bogus: 1)
    end
  end
end
