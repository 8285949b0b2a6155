defmodule Emily.Fast.FastLinearTest do
  # Emily.Native.fast_linear (em_fast_linear, the decode path's fused
  # matrix-vector product) and fast_heads (em_fast_heads, with and without
  # the KV-cache write) against the same formulas composed in Nx.
  use ExUnit.Case, async: true
  doctest Emily.Fast.Decode

  defp emily(t), do: Nx.backend_transfer(t, Emily.Backend)

  defp native_result(ref, shape) do
    ref |> Emily.to_binary() |> Nx.from_binary(:f32) |> Nx.reshape(shape)
  end

  setup do
    x = Nx.sin(Nx.multiply(Nx.iota({3, 16}, type: :f32), 0.37))
    w = Nx.cos(Nx.multiply(Nx.iota({5, 16}, type: :f32), 0.11))
    g = Nx.sin(Nx.add(Nx.multiply(Nx.iota({5, 16}, type: :f32), 0.23), 1.0))
    nw = Nx.add(1.0, Nx.multiply(0.1, Nx.cos(Nx.iota({16}, type: :f32))))
    r = Nx.multiply(Nx.iota({3, 5}, type: :f32), 0.5)
    %{x: x, w: w, g: g, nw: nw, r: r}
  end

  test "norm prologue, SiLU gate and residual match the composed ops", c do
    eps = 1.0e-6
    ms = Nx.mean(Nx.multiply(c.x, c.x), axes: [-1], keep_axes: true)
    xn = c.x |> Nx.multiply(Nx.rsqrt(Nx.add(ms, eps))) |> Nx.multiply(c.nw)
    h = Nx.dot(xn, Nx.transpose(c.w))
    gg = Nx.dot(xn, Nx.transpose(c.g))
    expected = gg |> Nx.multiply(Nx.sigmoid(gg)) |> Nx.multiply(h) |> Nx.add(c.r)

    [x, w, g, nw, r] = Enum.map([c.x, c.w, c.g, c.nw, c.r], &emily(&1).data.ref)
    got = native_result(Emily.Native.fast_linear(x, w, true, nw, eps, g, r), {3, 5})
    assert Nx.all_close(got, expected, atol: 1.0e-5, rtol: 1.0e-5) |> Nx.to_number() == 1

    plain = native_result(Emily.Native.fast_linear(x, w, false, nil, 0.0, nil, nil), {3, 5})

    assert Nx.all_close(plain, Nx.dot(c.x, Nx.transpose(c.w)), atol: 1.0e-5) |> Nx.to_number() ==
             1
  end

  test "fast_heads splits, norms and keeps heads in the attention layout", c do
    # x {1, 3, 16}: 4 heads of 4; heads 1..2, RMS-normed, no rotation
    x = Nx.reshape(c.x, {1, 3, 16})
    heads = x |> Nx.reshape({1, 3, 4, 4}) |> Nx.slice_along_axis(1, 2, axis: 2)
    ms = Nx.mean(Nx.multiply(heads, heads), axes: [-1], keep_axes: true)

    expected =
      heads |> Nx.multiply(Nx.rsqrt(Nx.add(ms, 1.0e-6))) |> Nx.transpose(axes: [0, 2, 1, 3])

    ref = emily(x).data.ref

    out =
      Emily.Native.fast_heads(ref, 4, 1, 2, true, nil, 1.0e-6, nil, 0, false, 0.0, 0.0, nil, nil)

    got = native_result(out, {1, 2, 3, 4})
    assert Nx.all_close(got, expected, atol: 1.0e-5) |> Nx.to_number() == 1
  end

  test "Emily.Fast.linear: the native block matches its fallback on Nx.BinaryBackend", c do
    opts = [norm_weight: c.nw, gate: c.g, residual: c.r]
    fallback = Emily.Fast.linear(c.x, c.w, opts)
    assert fallback.data.__struct__ == Nx.BinaryBackend

    [x, w, g, nw, r] = Enum.map([c.x, c.w, c.g, c.nw, c.r], &emily/1)
    native = Emily.Fast.linear(x, w, norm_weight: nw, gate: g, residual: r)
    assert native.data.__struct__ == Emily.Backend

    assert Nx.all_close(Nx.backend_transfer(native), fallback, atol: 1.0e-5) |> Nx.to_number() ==
             1

    # plain, and the norm without weight, under defn (Emily.Compiler)
    f = Nx.Defn.jit(fn x, w -> Emily.Fast.linear(x, w, norm: true) end, compiler: Emily.Compiler)
    expected = Emily.Fast.linear(c.x, c.w, norm: true)

    assert Nx.all_close(Nx.backend_transfer(f.(x, w)), expected, atol: 1.0e-5) |> Nx.to_number() ==
             1
  end

  test "Emily.Fast.heads: the native block matches its fallback", c do
    x = Nx.reshape(Nx.concatenate([c.x, c.x, c.x]), {1, 3, 48})
    nw = Nx.add(1.0, Nx.multiply(0.1, Nx.sin(Nx.iota({8}, type: :f32))))
    opts = [head_dim: 8, first: 1, count: 3, norm_weight: nw, base: 1.0e6]

    for offset <- [nil, 5, Nx.tensor(7)] do
      fallback = Emily.Fast.heads(x, offset, opts)
      assert fallback.shape == {1, 3, 3, 8}
      off = if is_struct(offset, Nx.Tensor), do: emily(offset), else: offset
      native = Emily.Fast.heads(emily(x), off, Keyword.put(opts, :norm_weight, emily(nw)))
      assert native.data.__struct__ == Emily.Backend

      assert Nx.all_close(Nx.backend_transfer(native), fallback, atol: 1.0e-5) |> Nx.to_number() ==
               1
    end

    assert_raise ArgumentError, ~r/Emily.Fast.heads: x must be/, fn ->
      Emily.Fast.heads(x, nil, head_dim: 8, first: 5, count: 2)
    end
  end

  test "Emily.Fast.heads with :cache: the rows written into the cache, as Nx.put_slice", c do
    x = Nx.reshape(Nx.concatenate([c.x, c.x, c.x]), {1, 3, 48})
    nw = Nx.add(1.0, Nx.multiply(0.1, Nx.sin(Nx.iota({8}, type: :f32))))
    cache = Nx.cos(Nx.multiply(Nx.iota({1, 3, 7, 8}, type: :f32), 0.05))
    k_opts = [head_dim: 8, first: 1, count: 3, norm_weight: nw, base: 1.0e6]
    v_opts = [head_dim: 8, first: 2, count: 3]

    # k style (norm and RoPE at 5), v style (neither); starts in the middle,
    # clamped from above (6 -> 4 of l = 7, s = 3) and below, as a tensor
    for {offset, opts} <- [{5, k_opts}, {nil, v_opts}],
        start <- [2, 6, Nx.tensor(-2, type: :s64)] do
      heads = Emily.Fast.heads(x, offset, opts)
      expected = Nx.put_slice(cache, [0, 0, start, 0], heads)
      assert expected.data.__struct__ == Nx.BinaryBackend

      cache_opts = opts ++ [cache: cache, cache_offset: start]
      fallback = Emily.Fast.heads(x, offset, cache_opts)
      assert fallback.shape == {1, 3, 7, 8}
      assert Nx.all_close(fallback, expected, atol: 0.0, rtol: 0.0) |> Nx.to_number() == 1

      start_e = if is_struct(start, Nx.Tensor), do: emily(start), else: start
      native_opts = Keyword.merge(opts, cache: emily(cache), cache_offset: start_e)

      native_opts =
        if opts[:norm_weight],
          do: Keyword.put(native_opts, :norm_weight, emily(nw)),
          else: native_opts

      native = Emily.Fast.heads(emily(x), offset, native_opts)
      assert native.data.__struct__ == Emily.Backend

      assert Nx.all_close(Nx.backend_transfer(native), expected, atol: 1.0e-5)
             |> Nx.to_number() == 1
    end

    # under defn (Emily.Compiler): k written at the step's position
    f =
      Nx.Defn.jit(
        fn x, nw, cache, pos ->
          opts = Keyword.merge(k_opts, norm_weight: nw, cache: cache, cache_offset: pos)
          Emily.Fast.heads(x, pos, opts)
        end,
        compiler: Emily.Compiler
      )

    pos = Nx.tensor(3)
    got = f.(emily(x), emily(nw), emily(cache), emily(pos))
    expected = Nx.put_slice(cache, [0, 0, 3, 0], Emily.Fast.heads(x, pos, k_opts))
    assert Nx.all_close(Nx.backend_transfer(got), expected, atol: 1.0e-5) |> Nx.to_number() == 1

    assert_raise ArgumentError, ~r/:cache needs :cache_offset/, fn ->
      Emily.Fast.heads(x, nil, v_opts ++ [cache: cache])
    end

    assert_raise ArgumentError,
                 ~r/cache must be \{1, 3, l, 8\} with l >= 3, got \{1, 3, 2, 8\}/,
                 fn ->
                   Emily.Fast.heads(
                     x,
                     nil,
                     v_opts ++ [cache: Nx.slice_along_axis(cache, 0, 2, axis: 2), cache_offset: 0]
                   )
                 end
  end

  test "the engine checks the cache", c do
    x = emily(Nx.reshape(c.x, {1, 3, 16})).data.ref
    cache = emily(Nx.iota({1, 2, 2, 4}, type: :f32)).data.ref
    off = emily(Nx.tensor(0)).data.ref

    assert_raise ArgumentError,
                 ~r/fast_heads: cache f32\[1,2,2,4\] must be \(B, count, L, head_dim\)/,
                 fn ->
                   Emily.Native.fast_heads(
                     x,
                     4,
                     0,
                     2,
                     false,
                     nil,
                     0.0,
                     nil,
                     0,
                     false,
                     0.0,
                     0.0,
                     cache,
                     off
                   )
                 end
  end

  test "Emily.Fast.linear checks shapes", c do
    assert_raise ArgumentError, ~r/must share k/, fn ->
      Emily.Fast.linear(c.x, Nx.transpose(c.w))
    end

    assert_raise ArgumentError, ~r/residual must have shape \{3, 5\}/, fn ->
      Emily.Fast.linear(c.x, c.w, residual: c.nw)
    end
  end

  test "the engine validates the shapes", c do
    x = emily(c.x).data.ref
    wt = emily(Nx.transpose(c.w)).data.ref

    assert_raise ArgumentError, ~r/fast_linear: x f32\[3,16\]/, fn ->
      Emily.Native.fast_linear(x, wt, false, nil, 0.0, nil, nil)
    end
  end
end
