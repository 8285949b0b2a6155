defmodule Emily.GPUTest do
  # Emily.Tensor on the GPU against the same calls on the CPU. The C-level
  # comparison (test/cuda) covers every kernel and dtype; this file checks
  # the Elixir path end to end: creation on the device, numbers beside GPU
  # tensors, reads, jit, grad, streams and memory counters.
  #
  # Skipped, with the reason printed, where no GPU is usable (CI).
  use ExUnit.Case, async: false

  alias Emily.Tensor, as: T

  case Emily.Device.available(:gpu) do
    :ok ->
      :ok

    {:error, reason} ->
      IO.puts("Emily.GPUTest skipped: #{reason}")
      @moduletag skip: "no usable GPU: #{reason}"
  end

  @gpu {Emily.Tensor, device: :gpu}

  defp rand(shape, seed, type \\ :f32) do
    key = T.Random.key(seed)
    T.Random.uniform_split(key, -2.0, 2.0, shape: shape, type: type)
  end

  defp gpu(t), do: T.to_device(t, :gpu)

  # Same values within rtol * (|cpu| + floor) (exact for integers); sums of
  # many terms pass a floor near the terms' magnitude.
  defp assert_close(gpu_result, cpu_result, rtol, floor \\ 1.0e-3) do
    assert T.device(gpu_result) == {:gpu, 0}
    assert gpu_result.shape == cpu_result.shape
    assert gpu_result.type == cpu_result.type
    g = gpu_result |> T.to_device(:cpu) |> T.to_flat_list()
    c = T.to_flat_list(cpu_result)

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

  defp run_case("exp", x), do: T.exp(x)
  defp run_case("tanh", x), do: T.tanh(x)
  defp run_case("x * 2.5 + 1" <> _, x), do: T.add(T.multiply(x, 2.5), 1)
  defp run_case("sum over axis 1", x), do: T.sum(x, axes: [1])
  defp run_case("mean", x), do: T.mean(x)
  defp run_case("argmax over axis 0", x), do: T.argmax(x, axis: 0)
  defp run_case("transpose + reshape", x), do: x |> T.transpose() |> T.reshape({4, 12})
  defp run_case("slice", x), do: T.slice(x, [1, 2], [3, 4])
  defp run_case("pad", x), do: T.pad(x, 0.0, [{1, 2, 0}, {0, 1, 1}])
  defp run_case("concatenate", x), do: T.concatenate([x, T.negate(x)], axis: 1)
  defp run_case("sort", x), do: T.sort(x, axis: 1)
  defp run_case("argsort desc", x), do: T.argsort(x, axis: 1, direction: :desc)
  defp run_case("top_k values", x), do: elem(T.top_k(x, k: 3), 0)
  defp run_case("cumulative_sum", x), do: T.cumulative_sum(x, axis: 1)
  defp run_case("dot with its transpose", x), do: T.dot(x, T.transpose(x))
  defp run_case("as_type s32", x), do: T.as_type(T.multiply(x, 10), :s32)
  defp run_case("select", x), do: T.select(T.greater(x, 0), x, T.multiply(x, -3))
  defp run_case("clip", x), do: T.clip(x, -1.0, 1.0)
  defp run_case("take", x), do: T.take(x, T.to_device(T.tensor([0, 5, 2]), T.device(x)), axis: 0)

  defp run_case("indexed_add", x) do
    on_x = &T.to_device(&1, T.device(x))
    T.indexed_add(x, on_x.(T.tensor([[0, 1], [0, 1], [5, 7]])), on_x.(T.tensor([1.0, 2.0, 3.0])))
  end

  describe "Emily.Tensor ops on the GPU match the CPU" do
    for name <- @cases do
      test name do
        x = rand({6, 8}, 11)
        assert_close(run_case(unquote(name), gpu(x)), run_case(unquote(name), x), 1.0e-5)
      end
    end
  end

  describe "placement" do
    test "creation functions honour the :gpu backend" do
      t = T.iota({3, 4}, backend: @gpu)
      assert T.device(t) == {:gpu, 0}
      assert T.to_list(t) == T.to_list(T.iota({3, 4}))

      T.with_default_backend(@gpu, fn ->
        assert T.device(T.tensor([1.0, 2.0])) == {:gpu, 0}
      end)
    end

    test "keys and samples follow a GPU default backend (as Nx.Random.key does)" do
      draw = fn ->
        key = T.Random.key(42)
        {normal, key2} = T.Random.normal(key, shape: {4, 5})
        {uniform, _} = T.Random.uniform(key2, shape: {4, 5})
        {ints, _} = T.Random.randint(key, 0, 10, shape: {3, 3})
        {shuffled, _} = T.Random.shuffle(key, T.iota({6}))
        {picked, _} = T.Random.choice(key, T.iota({6}), samples: 3, replace: false)
        # beside tensors created on the same default backend
        [key, key2, normal, uniform, ints, shuffled, picked, T.add(normal, T.iota({4, 5}))]
      end

      on_cpu = draw.()
      previous = T.global_default_backend(@gpu)

      on_gpu =
        try do
          draw.()
        after
          T.global_default_backend(previous)
        end

      Enum.zip(on_gpu, on_cpu)
      |> Enum.each(fn {g, c} ->
        assert T.device(g) == {:gpu, 0}
        assert T.to_binary(T.to_device(g, :cpu)) == T.to_binary(c)
      end)
    end

    test "random numbers are the CPU's bits" do
      key = T.Random.key(42)
      cpu = T.Random.normal_split(key, shape: {1000})
      on_gpu = T.Random.normal_split(gpu(key), shape: {1000})
      assert T.to_binary(T.to_device(on_gpu, :cpu)) == T.to_binary(cpu)
    end

    test "a GPU tensor beside a CPU tensor of rank > 0 raises" do
      assert_raise ArgumentError, ~r/different devices/, fn ->
        T.add(gpu(T.tensor([1.0, 2.0])), T.tensor([1.0, 2.0]))
      end
    end

    test "memory counters of the GPU grow and return" do
      Emily.Memory.clear_cache()
      before = Emily.Memory.stats(:gpu).active
      t = gpu(rand({1024, 1024}, 3)) |> T.exp()
      Emily.eval(t.ref)
      assert Emily.Memory.stats(:gpu).active >= before + 4 * 1024 * 1024
    end

    test "async_eval on the GPU, then a read" do
      x = gpu(rand({256, 256}, 5))
      y = T.dot(x, x)
      :ok = Emily.async_eval([y.ref])
      assert_close(y, T.dot(rand({256, 256}, 5), rand({256, 256}, 5)), 1.0e-5, 16.0)
    end
  end

  describe "compiler" do
    test "jit on GPU inputs runs on the GPU, the same as eager there" do
      f = fn x, y -> T.sum(T.multiply(T.exp(x), y), axes: [1]) |> T.add(1.0) end
      jf = Emily.Compiler.jit(f)
      {x, y} = {gpu(rand({16, 32}, 7)), gpu(rand({16, 32}, 8))}
      out = jf.(x, y)
      assert T.device(out) == {:gpu, 0}
      assert T.to_binary(T.to_device(out, :cpu)) == T.to_binary(T.to_device(f.(x, y), :cpu))
      # The CPU call of the same jitted function gets its own program.
      cpu_out = jf.(T.to_device(x, :cpu), T.to_device(y, :cpu))
      assert T.device(cpu_out) == :cpu
      assert Emily.Compiler.cache_info(jf).misses == 2
    end

    test "constants created while tracing follow the inputs to the GPU" do
      jf = Emily.Compiler.jit(fn x -> T.add(x, T.iota({4})) end)
      out = jf.(gpu(T.tensor([1.0, 1.0, 1.0, 1.0])))
      assert T.to_list(T.to_device(out, :cpu)) == [1.0, 2.0, 3.0, 4.0]
    end

    test "a traced while loop runs on the GPU, numbers in its state included" do
      loop = fn x ->
        Emily.Compiler.while(
          {x, 0},
          fn {_x, i} -> T.less(i, 5) end,
          fn {x, i} -> {T.add(T.multiply(x, 1.5), i), T.add(i, 1)} end
        )
      end

      x = rand({33}, 31)
      {cpu_x, cpu_i} = Emily.Compiler.jit(loop).(x)
      {gpu_x, gpu_i} = Emily.Compiler.jit(loop).(gpu(x))
      assert T.device(gpu_x) == {:gpu, 0}
      assert T.to_number(T.to_device(gpu_i, :cpu)) == T.to_number(cpu_i)
      assert_close(gpu_x, cpu_x, 1.0e-6)
    end

    test "grad of a GPU computation matches the CPU's" do
      loss = fn w, x -> T.sum(T.tanh(T.dot(x, w))) end
      {w, x} = {rand({8, 4}, 21), rand({5, 8}, 22)}
      g_cpu = Emily.Compiler.grad(&loss.(&1, x)).(w)
      g_gpu = Emily.Compiler.grad(&loss.(&1, gpu(x))).(gpu(w))
      # Each entry sums products of O(1) terms that may cancel: the error
      # is relative to the terms (floor 1), not to the small result.
      assert_close(g_gpu, g_cpu, 1.0e-5, 1.0)
    end
  end
end
