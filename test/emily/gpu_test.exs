defmodule Emily.GPUTest.Fns do
  @moduledoc false
  import Nx.Defn

  defn loop(x) do
    while {x, i = 0}, i < 5 do
      {x * 1.5 + i, i + 1}
    end
  end

  defn hooked_loop(x) do
    while {x, i = 0}, i < 3 do
      {hook(x * 2, :step), i + 1}
    end
  end
end

defmodule Emily.GPUTest do
  # Nx on {Emily.Backend, device: :gpu} against the same calls on the CPU.
  # The C-level comparison (test/cuda) covers every kernel and dtype; this
  # file checks the Elixir path end to end: creation on the device, numbers
  # beside GPU tensors, reads, Emily.Compiler programs (while, grad),
  # streams and memory counters.
  #
  # Skipped, with the reason printed, where no GPU is usable (CI).
  use ExUnit.Case, async: false

  alias Emily.Native

  case Emily.Device.available(:gpu) do
    :ok ->
      :ok

    {:error, reason} ->
      IO.puts("Emily.GPUTest skipped: #{reason}")
      @moduletag skip: "no usable GPU: #{reason}"
  end

  @gpu {Emily.Backend, device: :gpu}
  @cpu {Emily.Backend, device: :cpu}

  setup do
    Nx.default_backend(@cpu)
    :ok
  end

  defp rand(shape, seed, type \\ :f32) do
    key = Nx.Random.key(seed)
    {t, _} = Nx.Random.uniform(key, -2.0, 2.0, shape: shape, type: type)
    t
  end

  defp gpu(t), do: Nx.backend_copy(t, @gpu)
  defp cpu(t), do: Nx.backend_copy(t, @cpu)

  # The engine device of a tensor: :cpu or {:gpu, index}.
  defp device(%Nx.Tensor{data: %Emily.Backend{ref: ref}}) do
    case Native.array_device(ref) do
      0 -> :cpu
      n -> {:gpu, n - 1}
    end
  end

  # `t` on the device of `like`.
  defp on(t, like), do: if(device(like) == :cpu, do: t, else: gpu(t))

  # Same values within rtol * (|cpu| + floor) (exact for integers); sums of
  # many terms pass a floor near the terms' magnitude.
  defp assert_close(gpu_result, cpu_result, rtol, floor \\ 1.0e-3) do
    assert device(gpu_result) == {:gpu, 0}
    assert gpu_result.shape == cpu_result.shape
    assert gpu_result.type == cpu_result.type
    g = gpu_result |> cpu() |> Nx.to_flat_list()
    c = Nx.to_flat_list(cpu_result)

    Enum.zip(g, c)
    |> Enum.each(fn {a, b} ->
      if is_number(a) and is_number(b) do
        assert abs(a - b) <= rtol * (abs(b) + floor), "gpu #{a} vs cpu #{b}"
      else
        assert a == b
      end
    end)
  end

  # Each case: a name and the same call made on a {6, 8} f32 tensor.
  @cases [
    "exp",
    "tanh",
    "x * 2.5 + 1 (numbers beside a GPU tensor)",
    "sum over axis 1",
    "mean",
    "argmax over axis 0",
    "transpose + reshape",
    "slice",
    "pad",
    "concatenate",
    "sort",
    "argsort desc",
    "top_k values",
    "cumulative_sum",
    "dot with its transpose",
    "as_type s32",
    "select",
    "clip",
    "take",
    "indexed_add"
  ]

  defp run_case("exp", x), do: Nx.exp(x)
  defp run_case("tanh", x), do: Nx.tanh(x)
  defp run_case("x * 2.5 + 1" <> _, x), do: Nx.add(Nx.multiply(x, 2.5), 1)
  defp run_case("sum over axis 1", x), do: Nx.sum(x, axes: [1])
  defp run_case("mean", x), do: Nx.mean(x)
  defp run_case("argmax over axis 0", x), do: Nx.argmax(x, axis: 0)
  defp run_case("transpose + reshape", x), do: x |> Nx.transpose() |> Nx.reshape({4, 12})
  defp run_case("slice", x), do: Nx.slice(x, [1, 2], [3, 4])
  defp run_case("pad", x), do: Nx.pad(x, 0.0, [{1, 2, 0}, {0, 1, 1}])
  defp run_case("concatenate", x), do: Nx.concatenate([x, Nx.negate(x)], axis: 1)
  defp run_case("sort", x), do: Nx.sort(x, axis: 1)
  defp run_case("argsort desc", x), do: Nx.argsort(x, axis: 1, direction: :desc)
  defp run_case("top_k values", x), do: elem(Nx.top_k(x, k: 3), 0)
  defp run_case("cumulative_sum", x), do: Nx.cumulative_sum(x, axis: 1)
  defp run_case("dot with its transpose", x), do: Nx.dot(x, Nx.transpose(x))
  defp run_case("as_type s32", x), do: Nx.as_type(Nx.multiply(x, 10), :s32)
  defp run_case("select", x), do: Nx.select(Nx.greater(x, 0), x, Nx.multiply(x, -3))
  defp run_case("clip", x), do: Nx.clip(x, -1.0, 1.0)
  defp run_case("take", x), do: Nx.take(x, on(Nx.tensor([0, 5, 2]), x), axis: 0)

  defp run_case("indexed_add", x) do
    Nx.indexed_add(
      x,
      on(Nx.tensor([[0, 1], [0, 1], [5, 7]]), x),
      on(Nx.tensor([1.0, 2.0, 3.0]), x)
    )
  end

  # Sums of products of x's entries (|x| < 2, 8 terms) cancel down to near
  # zero: their rounding is relative to the terms' size, not the result's.
  @floor %{"dot with its transpose" => 8.0}

  describe "Nx ops on the GPU match the CPU" do
    for name <- @cases do
      test name do
        x = rand({6, 8}, 11)
        floor = Map.get(@floor, unquote(name), 1.0e-3)
        assert_close(run_case(unquote(name), gpu(x)), run_case(unquote(name), x), 1.0e-5, floor)
      end
    end
  end

  describe "placement" do
    test "creation functions honour the :gpu backend" do
      t = Nx.iota({3, 4}, backend: @gpu)
      assert device(t) == {:gpu, 0}
      assert Nx.to_list(t) == Nx.to_list(Nx.iota({3, 4}))

      Nx.with_default_backend(@gpu, fn ->
        assert device(Nx.tensor([1.0, 2.0])) == {:gpu, 0}
      end)
    end

    test "keys and samples follow a GPU default backend (as Nx.Random.key does)" do
      draw = fn ->
        key = Nx.Random.key(42)
        {normal, key2} = Nx.Random.normal(key, shape: {4, 5})
        {uniform, _} = Nx.Random.uniform(key2, shape: {4, 5})
        {ints, _} = Nx.Random.randint(key, 0, 10, shape: {3, 3})
        {shuffled, _} = Nx.Random.shuffle(key, Nx.iota({6}))
        {picked, _} = Nx.Random.choice(key, Nx.iota({6}), samples: 3, replace: false)
        # beside tensors created on the same default backend
        [key, key2, normal, uniform, ints, shuffled, picked, Nx.add(normal, Nx.iota({4, 5}))]
      end

      on_cpu = draw.()
      on_gpu = Nx.with_default_backend(@gpu, draw)

      Enum.zip(on_gpu, on_cpu)
      |> Enum.each(fn {g, c} ->
        assert device(g) == {:gpu, 0}
        assert Nx.to_binary(cpu(g)) == Nx.to_binary(c)
      end)
    end

    test "random numbers are the CPU's bits" do
      key = Nx.Random.key(42)
      {cpu_bits, _} = Nx.Random.normal(key, shape: {1000})
      # Nx.Random's defn constants are Nx.BinaryBackend tensors, which join
      # the computation on the default backend's device.
      {on_gpu, _} =
        Nx.with_default_backend(@gpu, fn -> Nx.Random.normal(gpu(key), shape: {1000}) end)

      assert device(on_gpu) == {:gpu, 0}
      assert Nx.to_binary(cpu(on_gpu)) == Nx.to_binary(cpu_bits)
    end

    test "a GPU tensor beside a CPU tensor of rank > 0 raises" do
      assert_raise ArgumentError, ~r/different devices/, fn ->
        Nx.add(gpu(Nx.tensor([1.0, 2.0])), Nx.tensor([1.0, 2.0]))
      end
    end

    test "memory counters of the GPU grow and return" do
      Emily.Memory.clear_cache()
      before = Emily.Memory.stats(:gpu).active
      t = gpu(rand({1024, 1024}, 3)) |> Nx.exp()
      Emily.eval(t.data.ref)
      assert Emily.Memory.stats(:gpu).active >= before + 4 * 1024 * 1024
    end

    test "async_eval on the GPU, then a read" do
      x = gpu(rand({256, 256}, 5))
      y = Nx.dot(x, x)
      :ok = Emily.async_eval([y.data.ref])
      assert_close(y, Nx.dot(rand({256, 256}, 5), rand({256, 256}, 5)), 1.0e-5, 16.0)
    end
  end

  describe "Emily.Compiler" do
    test "a program on GPU inputs runs on the GPU, the same as eager there" do
      f = fn x, y -> Nx.sum(Nx.multiply(Nx.exp(x), y), axes: [1]) |> Nx.add(1.0) end
      jf = Nx.Defn.jit(f, compiler: Emily.Compiler, device: :gpu)
      {x, y} = {gpu(rand({16, 32}, 7)), gpu(rand({16, 32}, 8))}
      out = jf.(x, y)
      assert device(out) == {:gpu, 0}
      assert_close(out, cpu(f.(x, y)), 1.0e-6)
      # The CPU compilation of the same function is a program of its own.
      cpu_out = Nx.Defn.jit(f, compiler: Emily.Compiler).(cpu(x), cpu(y))
      assert device(cpu_out) == :cpu
    end

    test "constants created while tracing follow the program to the GPU" do
      jf =
        Nx.Defn.jit(fn x -> Nx.add(x, Nx.iota({4})) end, compiler: Emily.Compiler, device: :gpu)

      out = jf.(gpu(Nx.tensor([1.0, 1.0, 1.0, 1.0])))
      assert device(out) == {:gpu, 0}
      assert Nx.to_list(cpu(out)) == [1.0, 2.0, 3.0, 4.0]
    end

    test "a while loop runs on the GPU, numbers in its state included" do
      loop = &Emily.GPUTest.Fns.loop/1
      x = rand({33}, 31)
      {cpu_x, cpu_i} = Nx.Defn.jit(loop, compiler: Emily.Compiler).(x)
      {gpu_x, gpu_i} = Nx.Defn.jit(loop, compiler: Emily.Compiler, device: :gpu).(gpu(x))
      assert device(gpu_x) == {:gpu, 0}
      assert Nx.to_number(cpu(gpu_i)) == Nx.to_number(cpu_i)
      assert_close(gpu_x, cpu_x, 1.0e-6)
    end

    test "hooks inside a GPU while loop fire each iteration, from one program" do
      parent = self()
      hooks = %{step: &send(parent, {:step, &1})}

      jit =
        Nx.Defn.jit(&Emily.GPUTest.Fns.hooked_loop/1,
          compiler: Emily.Compiler,
          device: :gpu,
          hooks: hooks
        )

      {x, i} = jit.(gpu(Nx.tensor([1.0, -2.0])))
      assert Nx.to_number(cpu(i)) == 3
      assert Nx.to_list(cpu(x)) == [8.0, -16.0]

      steps =
        for _ <- 1..3 do
          assert_received {:step, value}
          assert device(value) == {:gpu, 0}
          Nx.to_list(cpu(value))
        end

      assert steps == [[2.0, -4.0], [4.0, -8.0], [8.0, -16.0]]
      refute_received {:step, _}
    end

    test "grad of a GPU computation matches the CPU's" do
      grad = fn w, x -> Nx.Defn.grad(w, &Nx.sum(Nx.tanh(Nx.dot(x, &1)))) end
      {w, x} = {rand({8, 4}, 21), rand({5, 8}, 22)}
      g_cpu = Nx.Defn.jit(grad, compiler: Emily.Compiler).(w, x)
      g_gpu = Nx.Defn.jit(grad, compiler: Emily.Compiler, device: :gpu).(gpu(w), gpu(x))
      # Each entry sums products of O(1) terms that may cancel: the error
      # is relative to the terms (floor 1), not to the small result.
      assert_close(g_gpu, g_cpu, 1.0e-5, 1.0)
    end
  end
end
