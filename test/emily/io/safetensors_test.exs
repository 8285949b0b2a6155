defmodule Emily.IO.SafeTensorsTest do
  use ExUnit.Case, async: true

  @golden Path.expand("../../oracle/golden", __DIR__)
  @dtypes Path.join(@golden, "st_dtypes.safetensors")

  # A scratch directory per test under the system's temp dir (not the
  # project tree), removed afterwards.
  setup do
    dir = Path.join(System.tmp_dir!(), "emily_io_#{System.unique_integer([:positive])}")
    File.mkdir_p!(dir)
    on_exit(fn -> File.rm_rf!(dir) end)
    %{tmp_dir: dir}
  end

  defp bytes_of(tensor), do: Nx.to_binary(tensor)

  # The golden file has one F8_E4M3 tensor, which the package cannot read and
  # our writer cannot write; the rest is every dtype the engine reads. A copy
  # without it (and without the empty tensor: the package's pread of 0 bytes
  # answers :eof) for both readers.
  defp readable_golden(dir) do
    all = Emily.SafeTensors.info!(@dtypes)
    names = for %{name: n, dtype: d} <- all, d != "F8_E4M3", n != "empty", do: n
    path = Path.join(dir, "readable.safetensors")
    Emily.SafeTensors.write!(path, Emily.SafeTensors.read!(@dtypes, only: names))
    path
  end

  test "read! matches the safetensors package on the golden file", %{tmp_dir: dir} do
    path = readable_golden(dir)
    ours = Emily.SafeTensors.read!(path)
    theirs = Safetensors.read!(path)

    assert Map.keys(ours) |> Enum.sort() == Map.keys(theirs) |> Enum.sort()
    assert map_size(ours) == 15

    for {name, t} <- theirs do
      mine = ours[name]
      assert %Emily.Backend{} = mine.data
      assert mine.shape == t.shape, name
      assert mine.type == t.type, name
      assert bytes_of(mine) == bytes_of(t), name
    end
  end

  test "read! gives every dtype of the reference writer's file", %{tmp_dir: dir} do
    info = Emily.SafeTensors.info!(@dtypes)
    by_name = Map.new(info, &{&1.name, &1})
    assert by_name["f8"] == %{name: "f8", dtype: "F8_E4M3", type: {:f8_e4m3fn, 8}, shape: {3}}
    assert by_name["bool"].type == {:u, 8}
    assert by_name["bf16"].type == {:bf, 16}

    t = Emily.SafeTensors.read!(@dtypes)
    assert map_size(t) == 17
    assert t["f8"].type == {:f8_e4m3fn, 8}
    assert Nx.to_flat_list(t["f8"]) == [1.0, -2.0, 0.0]
    assert Nx.to_binary(t["f8"]) == <<0x38, 0xC0, 0x00>>
    assert Nx.to_flat_list(t["u32"]) == [0, 1, 4_294_967_295]
    assert Nx.to_flat_list(t["i64"]) == [-9_223_372_036_854_775_808, 9_223_372_036_854_775_807]
    assert Nx.to_flat_list(t["u64"]) == [18_446_744_073_709_551_615, 0, 12_345_678_901_234]
    assert Nx.to_flat_list(t["f64"]) == [:math.pi(), -0.0, 1.0e300]
    assert Nx.to_flat_list(t["bf16"]) |> hd() == 1.0
    assert t["scalar"].shape == {} and Nx.to_number(t["scalar"]) == 2.5
    assert t["empty"].shape == {0, 4}
    assert Map.has_key?(t, "layer.0.weighté")
    # Lazy and zero-copy tensors are ordinary tensors for Nx.
    assert Nx.multiply(t["f32"], 2) |> Nx.divide(2) |> Nx.to_binary() == Nx.to_binary(t["f32"])

    f4 = ~s({"x":{"dtype":"F4","shape":[2],"data_offsets":[0,1]}})
    path = Path.join(dir, "f4.safetensors")
    File.write!(path, <<byte_size(f4)::little-64>> <> f4 <> <<0>>)
    assert [%{dtype: "F4", type: nil}] = Emily.SafeTensors.info!(path)
    assert_raise ArgumentError, ~r/dtype F4/, fn -> Emily.SafeTensors.read!(path) end
  end

  test "metadata!" do
    assert Emily.SafeTensors.metadata!(@dtypes) == %{"format" => "np", "note" => "golden é"}
  end

  test "read_sharded! from the directory or the index" do
    dir = Path.join(@golden, "st_sharded")
    from_dir = Emily.SafeTensors.read_sharded!(dir)
    from_index = Emily.SafeTensors.read_sharded!(Path.join(dir, "model.safetensors.index.json"))
    assert Map.keys(from_dir) |> Enum.sort() == ["a.weight", "b.bias", "b.weight"]
    assert Nx.to_flat_list(from_dir["a.weight"]) == [0.0, 1.0, 2.0, 3.0, 4.0, 5.0]
    assert Nx.to_flat_list(from_index["b.bias"]) == [1, 2, 3]
    assert from_index["b.weight"].type == {:f, 16}
  end

  test "write! then read! round trip, and the safetensors package reads ours", %{tmp_dir: dir} do
    path = Path.join(dir, "out.safetensors")

    tensors = %{
      "w" => Nx.iota({2, 3}, type: :f32),
      "b" => Nx.tensor([1, -2], type: :s64, backend: Nx.BinaryBackend),
      "h" => Nx.tensor([0.5, 1.5], type: :bf16),
      "t" => Nx.transpose(Nx.iota({2, 3}, type: :s16))
    }

    assert :ok = Emily.SafeTensors.write!(path, tensors, %{"format" => "pt"})
    back = Emily.SafeTensors.read!(path)
    theirs = Safetensors.read!(path)

    for {name, t} <- tensors do
      assert back[name].shape == t.shape
      assert Nx.to_binary(back[name]) == Nx.to_binary(t)
      assert Nx.to_binary(theirs[name]) == Nx.to_binary(t)
    end

    assert Emily.SafeTensors.metadata!(path) == %{"format" => "pt"}
    <<header_len::little-64, _::binary>> = File.read!(path)
    assert rem(header_len, 8) == 0
    # No temporary file left beside it.
    assert File.ls!(dir) == ["out.safetensors"]
  end

  test "tensors outlive everything but themselves", %{tmp_dir: dir} do
    path = Path.join(dir, "keep.safetensors")
    Emily.SafeTensors.write!(path, %{"x" => Nx.iota({1000}, type: :f32)})
    x = Emily.SafeTensors.read!(path)["x"]
    :erlang.garbage_collect()
    File.rm!(path)
    assert Nx.to_number(Nx.sum(x)) == 499_500.0
  end

  describe "hostile files raise ArgumentError" do
    setup %{tmp_dir: dir} do
      good = File.read!(Path.join(@golden, "st_sharded/model-00002-of-00002.safetensors"))
      %{good: good, dir: dir}
    end

    defp write_bytes(dir, name, bytes) do
      path = Path.join(dir, name)
      File.write!(path, bytes)
      path
    end

    test "truncated anywhere", %{good: good, dir: dir} do
      for n <- [0, 4, 7, 8, 20, byte_size(good) - 1] do
        path = write_bytes(dir, "t#{n}.safetensors", binary_part(good, 0, n))

        assert_raise ArgumentError, ~r/t#{n}\.safetensors/, fn ->
          Emily.SafeTensors.read!(path)
        end
      end
    end

    test "bad headers", %{dir: dir} do
      cases = [
        {~s({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,4]}}), 4, ~r/expected 8/},
        {~s({"a":{"dtype":"F32","shape":[1],"data_offsets":[0,8]}}), 4, ~r/outside/},
        {~s({"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]},"b":{"dtype":"F32","shape":[1],"data_offsets":[2,6]}}),
         8, ~r/overlap/},
        {~s({"a":{"dtype":"F32","shape":[-1],"data_offsets":[0,0]}}), 0, ~r/dim 0/},
        {~s({"a": nope}), 0, ~r/invalid JSON/},
        {~s({"__metadata__":{"k":1}}), 0, ~r/not a string/}
      ]

      for {{header, ndata, message}, i} <- Enum.with_index(cases) do
        bytes = <<byte_size(header)::little-64>> <> header <> :binary.copy(<<0>>, ndata)
        path = write_bytes(dir, "h#{i}.safetensors", bytes)
        assert_raise ArgumentError, message, fn -> Emily.SafeTensors.read!(path) end
      end

      path = write_bytes(dir, "huge.safetensors", <<1_000_000::little-64, "{}">>)

      assert_raise ArgumentError, ~r/header length 1000000/, fn ->
        Emily.SafeTensors.read!(path)
      end

      assert_raise ArgumentError, ~r/cannot open/, fn ->
        Emily.SafeTensors.read!(Path.join(dir, "absent"))
      end
    end

    test "unknown names and duplicate writes", %{dir: dir} do
      index = write_bytes(dir, "index.json", ~s({"weight_map": 3}))
      assert_raise ArgumentError, ~r/weight_map/, fn -> Emily.SafeTensors.read_sharded!(index) end

      index = write_bytes(dir, "index2.json", ~s({"weight_map": {"a": "../a.safetensors"}}))

      assert_raise ArgumentError, ~r/not a file name beside the index/, fn ->
        Emily.SafeTensors.read_sharded!(index)
      end

      assert_raise ArgumentError, ~r/c128, which safetensors cannot store/, fn ->
        Emily.SafeTensors.write!(Path.join(dir, "c.safetensors"), %{
          "c" => Nx.tensor([1.0], type: :c128)
        })
      end

      assert_raise ArgumentError, ~r/8-bit float/, fn ->
        Emily.SafeTensors.write!(Path.join(dir, "f8.safetensors"), %{
          "x" => Nx.tensor([1.0], type: :f8)
        })
      end

      assert Enum.sort(File.ls!(dir)) == ["index.json", "index2.json"]

      assert_raise ArgumentError, ~r/given twice/, fn ->
        Emily.SafeTensors.write!(Path.join(dir, "dup.safetensors"), %{
          "a" => Nx.tensor(1),
          :a => Nx.tensor(2)
        })
      end
    end
  end
end
