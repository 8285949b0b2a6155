defmodule Emily.Backend.RandomTest do
  use ExUnit.Case, async: true

  import EmilyTest.Helpers, only: [wrap: 1]

  setup do
    Nx.default_backend(Emily.Backend)
    :ok
  end

  alias Emily.Native
  alias Nx.Random, as: R

  defp t(list, opts \\ []), do: Nx.tensor(list, opts)

  # Values are compared exactly: the f32/f16 values Nx documents are the
  # decimal expansions of the stored floats.

  describe "known answers and layout" do
    test "Threefry-2x32-20 known answers (Random123)" do
      assert hash({0, 0}, {0, 0}) == [0x6B200159, 0x99BA4EFE]
      assert hash({0xFFFFFFFF, 0xFFFFFFFF}, {0xFFFFFFFF, 0xFFFFFFFF}) == [0x1CB996FC, 0xBB002BE7]
      assert hash({0x13198A2E, 0x03707344}, {0x243F6A88, 0x85A308D3}) == [0xC4923A9C, 0x483DF7A0]
    end

    test "split keys from a strided view" do
      keys = R.split(R.key(1701), parts: 3)
      k = keys |> Nx.transpose() |> Nx.transpose() |> Nx.slice([1, 0], [1, 2]) |> Nx.reshape({2})

      assert Nx.to_list(R.split(k)) ==
               Nx.to_list(R.split(Nx.tensor(Enum.at(Nx.to_list(keys), 1), type: :u32)))
    end
  end

  describe "statistics" do
    test "1M normals have mean 0 and variance 1; uniforms fill [0, 1)" do
      {n, key} = R.normal(R.key(2024), shape: {1_000_000})
      mean = Nx.to_number(Nx.mean(Nx.as_type(n, :f64)))
      var = Nx.to_number(Nx.variance(Nx.as_type(n, :f64)))
      assert abs(mean) < 0.005
      assert abs(var - 1.0) < 0.005

      {u, _} = R.uniform(key, -2.0, 3.0, shape: {1_000_000}, type: :f64)
      assert Nx.to_number(Nx.reduce_min(u)) >= -2.0
      assert Nx.to_number(Nx.reduce_max(u)) < 3.0
      assert abs(Nx.to_number(Nx.mean(u)) - 0.5) < 0.01
    end

    test "randint covers the range uniformly for every integer type" do
      for type <- [:u8, :s8, :u16, :s16, :u32, :s32, :u64, :s64] do
        {r, _} = R.randint(R.key(7), -3 |> max_for(type), 5, shape: {20_000}, type: type)
        lo = -3 |> max_for(type)
        assert r.type == Nx.Type.normalize!(type)
        vals = Nx.to_flat_list(r)
        assert Enum.min(vals) == lo and Enum.max(vals) == 4
        counts = Enum.frequencies(vals)
        expected = 20_000 / (5 - lo)
        assert Enum.all?(Map.values(counts), &(abs(&1 - expected) < 0.1 * expected))
      end
    end

    test "shuffle is a permutation; independent lanes differ" do
      {s, _} = R.shuffle(R.key(3), Nx.iota({5000}))
      assert Enum.sort(Nx.to_flat_list(s)) == Enum.to_list(0..4999)
      assert Nx.to_flat_list(s) != Enum.to_list(0..4999)

      {s, _} = R.shuffle(R.key(3), Nx.iota({4, 100}, axis: 1), axis: 1, independent: true)
      rows = Nx.to_list(s)
      assert Enum.all?(rows, &(Enum.sort(&1) == Enum.to_list(0..99)))
      assert length(Enum.uniq(rows)) == 4
    end

    test "gumbel and choice with probabilities" do
      {g, _} = R.gumbel(R.key(5), shape: {200_000}, type: {:f, 64})
      # Gumbel(0, 1): mean is the Euler-Mascheroni constant.
      assert abs(Nx.to_number(Nx.mean(g)) - 0.5772156649) < 0.01

      p = t([0.1, 0.2, 0.7])
      {c, _} = R.choice(R.key(9), t([0, 1, 2]), p, samples: 20_000)
      freq = Enum.frequencies(Nx.to_flat_list(c))
      assert abs(freq[2] / 20_000 - 0.7) < 0.02
      assert abs(freq[0] / 20_000 - 0.1) < 0.02
    end
  end

  defp max_for(v, type) when type in [:u8, :u16, :u32, :u64], do: max(v, 0)
  defp max_for(v, _), do: v

  defp hash({k0, k1}, {x0, x1}) do
    key = Nx.tensor([k0, k1], type: :u32)
    counters = Nx.tensor([x0, x1], type: :u32)
    Nx.to_list(wrap(Native.threefry2x32(key.data.ref, counters.data.ref)))
  end
end
