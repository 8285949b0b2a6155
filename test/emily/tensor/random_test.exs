defmodule Emily.Tensor.RandomTest do
  use ExUnit.Case, async: true

  alias Emily.Native
  alias Emily.Tensor, as: T
  alias Emily.Tensor.Random, as: R

  doctest Emily.Tensor.Random

  defp t(list, opts \\ []), do: T.tensor(list, opts)

  describe "devices" do
    test "a key from an integer is created on the default backend's device" do
      T.with_default_backend({Emily.Tensor, device: :cpu}, fn ->
        assert T.device(R.key(7)) == :cpu
      end)

      # key/1 asks the default backend as T.tensor/1 does: without a GPU it
      # raises instead of quietly making a CPU key (test/emily/gpu_test.exs
      # draws samples under a GPU default where a GPU exists).
      T.with_default_backend({Emily.Tensor, device: :gpu}, fn ->
        case Emily.Device.available(:gpu) do
          :ok ->
            assert T.device(R.key(7)) == {:gpu, 0}

          {:error, _} ->
            assert_raise ArgumentError, ~r/Emily.Tensor: device :gpu: the CUDA backend is not available/, fn ->
              R.key(7)
            end
        end
      end)
    end

    test "a key from a tensor, and the samples, stay on its device" do
      key = R.key(T.tensor(12, type: :u64))
      assert T.device(key) == :cpu
      {sample, key2} = R.normal(key, shape: {3})
      assert T.device(sample) == :cpu and T.device(key2) == :cpu
    end
  end

  # Values are compared exactly: the f32/f16 values Nx documents are the
  # decimal expansions of the stored floats.
  describe "Nx examples (bit for bit)" do
    test "key, split, fold_in" do
      assert T.to_list(R.key(12)) == [0, 12]
      assert T.to_list(R.key(999_999_999_999)) == [232, 3_567_587_327]
      assert T.to_list(R.key(T.tensor(999_999_999_999, type: :s64))) == [232, 3_567_587_327]
      assert T.to_list(R.key(T.tensor(12, type: :u64))) == [0, 12]

      assert T.to_list(R.split(R.key(1701))) ==
               [[56_197_195, 1_801_093_307], [961_309_823, 1_704_866_707]]

      assert T.to_list(R.split(R.key(1701), parts: 4)) == [
               [4_000_152_724, 2_030_591_747],
               [2_287_976_877, 2_598_630_646],
               [2_426_625_787, 580_268_518],
               [3_136_765_380, 433_355_682]
             ]

      assert T.to_list(R.fold_in(R.key(42), 99)) == [2_015_327_502, 1_351_855_566]
      assert T.to_list(R.fold_in(R.key(42), 1234)) == [1_356_445_167, 2_917_756_949]
    end

    test "uniform" do
      {u, new_key} = R.uniform(R.key(12))
      assert T.to_number(u) == 0.7691127061843872
      assert u.type == {:f, 32}
      # new_key is keys[0] of the split.
      assert T.to_list(new_key) == hd(T.to_list(R.split(R.key(12))))

      {u, _} = R.uniform(R.key(1701))
      assert T.to_number(u) == 0.9728643894195557

      {u, _} = R.uniform(R.key(1701), shape: {3, 2}, type: :f16)

      assert T.to_list(u) == [
               [0.75390625, 0.6484375],
               [0.7294921875, 0.21484375],
               [0.09765625, 0.0693359375]
             ]

      {u, _} = R.uniform(R.key(1701), shape: {2, 2}, type: :c64)

      assert T.to_list(u) == [
               [c(0.18404805660247803, 0.6546461582183838), c(0.5525915622711182, 0.11568140983581543)],
               [c(0.6074584722518921, 0.8104375600814819), c(0.247686505317688, 0.21975469589233398)]
             ]
    end

    test "normal" do
      {n, _} = R.normal(R.key(42))
      assert T.to_number(n) == 1.3694695234298706

      {n, _} = R.normal(R.key(42), 0, 1, shape: {3, 2}, type: :f16)

      assert T.to_list(n) == [
               [-0.32568359375, -0.77197265625],
               [0.39208984375, 0.5341796875],
               [0.270751953125, -2.080078125]
             ]

      {n, _} = R.normal(R.key(42), 0, 1, shape: {2, 2}, type: :c64)

      assert T.to_list(n) == [
               [c(-0.7632761001586914, 0.8661127686500549), c(-0.14282889664173126, -0.7384796142578125)],
               [c(0.678461492061615, 0.4118310809135437), c(-2.269538402557373, -0.3689095079898834)]
             ]

      {n, _} = R.normal(R.key(1337), 10, 5, shape: {1_000})
      assert T.to_number(T.mean(n)) == 9.70022201538086
      assert T.to_number(T.standard_deviation(n)) == 5.051416397094727
    end

    test "randint" do
      {r, _} = R.randint(R.key(1701), 1, 100)
      assert r.type == {:s, 32} and T.to_number(r) == 91
      {r, _} = R.randint(R.key(1701), 1, 100, shape: {3, 2}, type: :u32)
      assert T.to_list(r) == [[9, 20], [19, 6], [71, 15]]
    end

    test "gumbel" do
      {g, _} = R.gumbel(R.key(1))
      assert T.to_number(g) == -0.7294610142707825
      {g, _} = R.gumbel(R.key(1), shape: {2, 3})

      assert T.to_list(g) == [
               [0.6247938275337219, -0.21740718185901642, 0.7678327560424805],
               [0.7778404355049133, 4.0895304679870605, 0.3029090166091919]
             ]
    end

    test "shuffle and choice" do
      {s, _} = R.shuffle(R.key(42), T.iota({3, 4}, axis: 0))
      assert T.to_list(s) == [[2, 2, 2, 2], [0, 0, 0, 0], [1, 1, 1, 1]]

      {s, _} = R.shuffle(R.key(10), T.iota({3, 4}, axis: 1), independent: true, axis: 1)
      assert T.to_list(s) == [[2, 1, 3, 0], [3, 0, 1, 2], [2, 3, 0, 1]]

      k = R.key(2)
      {c, _} = R.choice(k, T.iota({3, 2}))
      assert T.to_list(c) == [4]
      {c, _} = R.choice(k, T.iota({3, 2}), samples: 6, replace: false)
      assert T.to_list(c) == [2, 0, 4, 5, 1, 3]

      k = R.key(1)
      p = t([0.1, 0.7, 0.2])
      {c, _} = R.choice(k, T.iota({4, 3}), p, samples: 3, axis: 1)
      assert T.to_list(c) == [[1, 0, 1], [4, 3, 4], [7, 6, 7], [10, 9, 10]]
      {c, _} = R.choice(k, T.iota({4, 3}), p, samples: 3, axis: 1, replace: false)
      assert T.to_list(c) == [[1, 2, 0], [4, 5, 3], [7, 8, 6], [10, 11, 9]]

      k = R.key(2)
      p = t([0.01, 0.1, 0.19, 0.6, 0.05, 0.05])
      {c, _} = R.choice(k, T.iota({2, 3}), p)
      assert T.to_list(c) == [3]
      {c, _} = R.choice(k, T.iota({2, 3}), p, samples: 6, replace: false)
      assert T.to_list(c) == [3, 1, 2, 5, 4, 0]
    end
  end

  describe "known answers and layout" do
    test "Threefry-2x32-20 known answers (Random123)" do
      assert hash({0, 0}, {0, 0}) == [0x6B200159, 0x99BA4EFE]
      assert hash({0xFFFFFFFF, 0xFFFFFFFF}, {0xFFFFFFFF, 0xFFFFFFFF}) == [0x1CB996FC, 0xBB002BE7]
      assert hash({0x13198A2E, 0x03707344}, {0x243F6A88, 0x85A308D3}) == [0xC4923A9C, 0x483DF7A0]
    end

    test "split keys from a strided view" do
      keys = R.split(R.key(1701), parts: 3)
      k = keys |> T.transpose() |> T.transpose() |> T.slice([1, 0], [1, 2]) |> T.reshape({2})
      assert T.to_list(R.split(k)) == T.to_list(R.split(T.tensor(Enum.at(T.to_list(keys), 1), type: :u32)))
    end

    test "key validation" do
      assert_raise ArgumentError, ~r/expected key to have shape \{2\}/, fn ->
        R.uniform(T.tensor([1, 2, 3], type: :u32))
      end

      assert_raise ArgumentError, ~r/32-bit unsigned/, fn -> R.uniform(T.tensor([1, 2])) end
      assert_raise ArgumentError, ~r/unknown keys/, fn -> R.uniform(R.key(1), foo: 1) end
      assert_raise ArgumentError, ~r/expected float or complex type/, fn ->
        R.uniform(R.key(1), type: :s32)
      end

      assert_raise ArgumentError, ~r/expected integer type/, fn ->
        R.randint(R.key(1), 0, 10, type: :f32)
      end

      assert_raise ArgumentError, ~r/floating-point/, fn -> R.gumbel(R.key(1), type: :s32) end

      assert_raise ArgumentError, ~r/cannot take more samples/, fn ->
        R.choice(R.key(1), T.iota({3}), samples: 4, replace: false)
      end
    end
  end

  describe "statistics" do
    test "1M normals have mean 0 and variance 1; uniforms fill [0, 1)" do
      {n, key} = R.normal(R.key(2024), shape: {1_000_000})
      mean = T.to_number(T.mean(T.as_type(n, :f64)))
      var = T.to_number(T.variance(T.as_type(n, :f64)))
      assert abs(mean) < 0.005
      assert abs(var - 1.0) < 0.005

      {u, _} = R.uniform(key, -2.0, 3.0, shape: {1_000_000}, type: :f64)
      assert T.to_number(T.reduce_min(u)) >= -2.0
      assert T.to_number(T.reduce_max(u)) < 3.0
      assert abs(T.to_number(T.mean(u)) - 0.5) < 0.01
    end

    test "randint covers the range uniformly for every integer type" do
      for type <- [:u8, :s8, :u16, :s16, :u32, :s32, :u64, :s64] do
        {r, _} = R.randint(R.key(7), -3 |> max_for(type), 5, shape: {20_000}, type: type)
        lo = -3 |> max_for(type)
        assert r.type == Emily.Tensor.Type.normalize!(type)
        vals = T.to_flat_list(r)
        assert Enum.min(vals) == lo and Enum.max(vals) == 4
        counts = Enum.frequencies(vals)
        expected = 20_000 / (5 - lo)
        assert Enum.all?(Map.values(counts), &(abs(&1 - expected) < 0.1 * expected))
      end
    end

    test "shuffle is a permutation; independent lanes differ" do
      {s, _} = R.shuffle(R.key(3), T.iota({5000}))
      assert Enum.sort(T.to_flat_list(s)) == Enum.to_list(0..4999)
      assert T.to_flat_list(s) != Enum.to_list(0..4999)

      {s, _} = R.shuffle(R.key(3), T.iota({4, 100}, axis: 1), axis: 1, independent: true)
      rows = T.to_list(s)
      assert Enum.all?(rows, &(Enum.sort(&1) == Enum.to_list(0..99)))
      assert length(Enum.uniq(rows)) == 4
    end

    test "gumbel and choice with probabilities" do
      {g, _} = R.gumbel(R.key(5), shape: {200_000}, type: :f64)
      # Gumbel(0, 1): mean is the Euler-Mascheroni constant.
      assert abs(T.to_number(T.mean(g)) - 0.5772156649) < 0.01

      p = t([0.1, 0.2, 0.7])
      {c, _} = R.choice(R.key(9), t([0, 1, 2]), p, samples: 20_000)
      freq = Enum.frequencies(T.to_flat_list(c))
      assert abs(freq[2] / 20_000 - 0.7) < 0.02
      assert abs(freq[0] / 20_000 - 0.1) < 0.02
    end
  end

  defp max_for(v, type) when type in [:u8, :u16, :u32, :u64], do: max(v, 0)
  defp max_for(v, _), do: v

  defp c(re, im), do: Emily.Complex.new(re, im)

  defp hash({k0, k1}, {x0, x1}) do
    key = T.tensor([k0, k1], type: :u32)
    counters = T.tensor([x0, x1], type: :u32)
    T.to_list(Emily.Tensor.Core.wrap(Native.threefry2x32(key.ref, counters.ref)))
  end
end
