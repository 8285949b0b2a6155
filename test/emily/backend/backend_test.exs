defmodule Emily.BackendTest do
  use ExUnit.Case, async: true

  defp emily(data, opts \\ []), do: Nx.tensor(data, Keyword.put_new(opts, :backend, Emily.Backend))

  describe "options" do
    test "init defaults to the CPU and no stream" do
      assert Emily.Backend.init([]) == [device: :cpu, stream: nil]
    end

    test "a tensor created on the CPU lives there" do
      t = emily([1, 2, 3], backend: {Emily.Backend, device: :cpu})
      assert Emily.Native.array_device(t.data.ref) == 0
      assert Nx.to_flat_list(t) == [1, 2, 3]
    end

    test "unknown options and devices raise ArgumentError naming them" do
      assert_raise ArgumentError, ~r/unknown options \[:colour\]/, fn ->
        Emily.Backend.init(colour: :red)
      end

      assert_raise ArgumentError, ~r/unknown device :tpu/, fn ->
        Emily.Backend.init(device: :tpu)
      end

      assert_raise ArgumentError, ~r/:stream must be an Emily.Stream/, fn ->
        Emily.Backend.init(stream: :fast)
      end
    end

    test "the GPU without the CUDA backend raises a clear ArgumentError" do
      case Emily.Device.available(:gpu) do
        :ok ->
          t = emily([1.0], backend: {Emily.Backend, device: :gpu})
          assert Emily.Native.array_device(t.data.ref) == 1

        {:error, _reason} ->
          assert_raise ArgumentError, ~r/Emily.Backend: device :gpu: the CUDA backend is not available/, fn ->
            emily([1.0], backend: {Emily.Backend, device: :gpu})
          end
      end
    end

    test "the default backend with options is used by Nx creation functions" do
      previous = Nx.default_backend({Emily.Backend, device: :cpu})

      try do
        t = Nx.iota({2, 3})
        assert %Emily.Backend{} = t.data
        assert Nx.to_flat_list(Nx.sum(t, axes: [1])) == [3, 12]
        assert Nx.to_flat_list(Nx.eye(2)) == [1, 0, 0, 1]
      after
        Nx.default_backend(previous)
      end
    end

    test "a stream option evaluates reads on that stream, and results inherit it" do
      stream = Emily.Stream.new(:cpu)
      t = emily([1.0, 2.0], backend: {Emily.Backend, stream: stream})
      assert t.data.stream == stream
      sum = t |> Nx.multiply(3) |> Nx.sum()
      assert sum.data.stream == stream
      assert Nx.to_number(sum) == 9.0
      Emily.Stream.close(stream)
      # A closed stream refuses work: the read really went to it.
      assert_raise RuntimeError, fn -> Nx.to_number(Nx.add(t, 1) |> Nx.sum()) end
    end
  end

  describe "laziness and data movement" do
    test "ops build nodes; reading evaluates" do
      t = emily([1.0, 2.0, 3.0]) |> Nx.multiply(2) |> Nx.add(1)
      refute Emily.Native.is_evaluated(t.data.ref)
      assert Nx.to_flat_list(t) == [3.0, 5.0, 7.0]
      assert Emily.Native.is_evaluated(t.data.ref)
    end

    test "to_binary honours the limit" do
      t = emily([1, 2, 3, 4], type: :s16)
      assert Nx.to_binary(t, limit: 2) == <<1::16-native, 2::16-native>>
      assert byte_size(Nx.to_binary(t)) == 8
    end

    test "inspect shows the values (evaluating) and honours the limit" do
      t = Nx.iota({10}, backend: Emily.Backend)
      assert inspect(t, limit: 3) =~ "[0, 1, 2, ...]"
    end

    test "transfer to Nx.BinaryBackend and back" do
      t = emily([[1.5, 2.5], [3.5, 4.5]])
      b = Nx.backend_transfer(t, Nx.BinaryBackend)
      assert %Nx.BinaryBackend{} = b.data
      assert Nx.to_flat_list(b) == [1.5, 2.5, 3.5, 4.5]
      # The source was released by the transfer.
      assert Emily.Native.is_deallocated(t.data.ref)

      back = Nx.backend_transfer(b, Emily.Backend)
      assert %Emily.Backend{} = back.data
      assert Nx.to_flat_list(back) == [1.5, 2.5, 3.5, 4.5]
    end

    test "backend_copy keeps the source and survives its deallocation" do
      t = emily([1, 2, 3])
      copy = Nx.backend_copy(t, Emily.Backend)
      assert Nx.backend_deallocate(t) == :ok
      assert Nx.backend_deallocate(t) == :already_deallocated
      assert Nx.to_flat_list(copy) == [1, 2, 3]
      assert %Nx.BinaryBackend{} = Nx.backend_copy(copy, Nx.BinaryBackend).data
    end

    test "a deallocated tensor raises ArgumentError when used" do
      t = emily([1, 2, 3])
      :ok = Nx.backend_deallocate(t)
      assert_raise ArgumentError, ~r/deallocated/, fn -> Nx.to_flat_list(Nx.add(t, 1)) end
    end

    test "to_batched splits along axis 0 with :repeat and :discard leftovers" do
      t = Nx.iota({5, 2}, backend: Emily.Backend)

      assert t |> Nx.to_batched(2, leftover: :repeat) |> Enum.map(&Nx.to_flat_list/1) ==
               [[0, 1, 2, 3], [4, 5, 6, 7], [8, 9, 0, 1]]

      assert t |> Nx.to_batched(2, leftover: :discard) |> Enum.map(&Nx.to_flat_list/1) ==
               [[0, 1, 2, 3], [4, 5, 6, 7]]
    end

    test "to_pointer and from_pointer round-trip" do
      t = emily([[1.5, 2.5], [3.5, 4.5]])
      pointer = Nx.to_pointer(t)
      assert %Nx.Pointer{kind: :local, data_size: 16} = pointer
      flat = Nx.from_pointer(Emily.Backend, pointer, {:f, 32}, {4})
      assert Nx.to_flat_list(flat) == [1.5, 2.5, 3.5, 4.5]

      assert_raise ArgumentError, ~r/:ipc/, fn -> Nx.to_pointer(t, mode: :ipc) end
    end
  end

  describe "inputs from other backends" do
    test "a BinaryBackend tensor mixed into an op is copied in" do
      binary = Nx.tensor([10, 20, 30], backend: Nx.BinaryBackend)
      sum = Nx.add(emily([1, 2, 3]), binary)
      assert %Emily.Backend{} = sum.data
      assert Nx.to_flat_list(sum) == [11, 22, 33]

      dot = Nx.dot(binary, emily([1, 1, 1]))
      assert Nx.to_number(dot) == 60
    end

    test "BinaryBackend indices and updates work with indexed ops" do
      target = Nx.iota({3}, backend: Emily.Backend)
      indices = Nx.tensor([[0], [2]], backend: Nx.BinaryBackend)
      updates = Nx.tensor([5, 7], backend: Nx.BinaryBackend)
      assert Nx.to_flat_list(Nx.indexed_add(target, indices, updates)) == [5, 1, 9]
    end
  end

  describe "types" do
    test "predicates are u8" do
      t = Nx.greater(emily([1, 2, 3]), 1)
      assert t.type == {:u, 8}
      assert Nx.to_flat_list(t) == [0, 1, 1]
      assert Nx.to_flat_list(Nx.logical_not(t)) == [1, 0, 0]
    end

    test "unsupported types raise ArgumentError naming the type" do
      assert_raise ArgumentError, ~r/the type u2 is not supported by Emily/, fn ->
        Nx.tensor([1], type: {:u, 2}, backend: Emily.Backend)
      end

      assert_raise ArgumentError, ~r/Emily.Backend.as_type: the type u4 is not supported/, fn ->
        Nx.as_type(emily([1, 2]), {:u, 4})
      end
    end

    test "bf16 constants round to nearest even" do
      # 1.00390625 is exactly halfway between two bf16 values; even wins.
      assert Nx.to_number(Nx.tensor(1.00390625, type: :bf16, backend: Emily.Backend)) == 1.0
      assert Nx.to_number(Nx.tensor(1.01171875, type: :bf16, backend: Emily.Backend)) == 1.015625
    end
  end

  describe "errors" do
    test "bad shapes raise ArgumentError (from Nx) without touching the engine" do
      assert_raise ArgumentError, ~r/cannot broadcast/, fn ->
        Nx.add(emily([1, 2, 3]), emily([1, 2]))
      end
    end

    test "engine errors on bad input are ArgumentError naming the op" do
      assert_raise ArgumentError, ~r/from_binary/, fn ->
        Emily.Backend.from_binary(%Nx.Tensor{type: {:f, 32}, shape: {2}, names: [nil]}, <<0, 0>>, [])
      end
    end
  end

  describe "native blocks and user functions" do
    test "reduce and window_reduce with a user function" do
      t = emily([[1, 2, 3], [4, 5, 6]])
      assert Nx.to_flat_list(Nx.reduce(t, 0, [axes: [1]], &Nx.add/2)) == [6, 15]
      assert Nx.to_flat_list(Nx.reduce(t, 1, &Nx.multiply/2)) == [720]

      windows = Nx.window_reduce(t, 0, {1, 2}, [strides: [1, 1]], &Nx.max/2)
      assert Nx.to_flat_list(windows) == [2, 3, 5, 6]
    end

    test "linalg factors reconstruct their input" do
      a = emily([[4.0, 1.0, 2.0], [1.0, 3.0, 0.5], [2.0, 0.5, 5.0]])
      {q, r} = Nx.LinAlg.qr(a)
      assert Nx.all_close(Nx.dot(q, r), a, atol: 1.0e-5) |> Nx.to_number() == 1
      {u, s, vt} = Nx.LinAlg.svd(a)
      assert Nx.all_close(u |> Nx.multiply(s) |> Nx.dot(vt), a, atol: 1.0e-5) |> Nx.to_number() == 1
      {w, v} = Nx.LinAlg.eigh(a)
      assert Nx.all_close(Nx.dot(a, v), Nx.multiply(v, w), atol: 1.0e-4) |> Nx.to_number() == 1
    end

    test "fft along a non-last axis matches the last-axis transform of the transpose" do
      t = Nx.iota({4, 3}, type: :f32, backend: Emily.Backend)
      along_0 = Nx.fft(t, axis: 0)
      along_last = t |> Nx.transpose() |> Nx.fft() |> Nx.transpose()
      assert Nx.all_close(along_0, along_last) |> Nx.to_number() == 1
    end
  end
end
