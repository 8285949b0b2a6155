defmodule Emily.Tensor.Template do
  @moduledoc """
  Templates, donation and host calls of `Emily.Tensor`, with Nx's API
  (`Nx.template/3`, `Nx.to_template/1`, `Nx.donatable/1`,
  `Nx.runtime_call/4`, `Nx.io_call/3`, `Nx.block/4`).

  A template is a tensor with a shape and a type but no data: its `:ref`
  is the atom `:template`. Metadata functions (`shape/1`, `type/1`,
  `rank/1`, `size/1`, ...) work on it; computing with it or reading it
  raises `ArgumentError`.

  Emily computes eagerly (there is no `defn`), so the host-call functions
  run their function at once on the actual values: `runtime_call/4`
  checks the result against the output template, `io_call/3` passes its
  data through, and `block/4` runs the block's default implementation
  (Emily has no specialised blocks).

  Every function here is delegated from `Emily.Tensor`; call them there.
  """

  alias Emily.Tensor.{Backend, Core, Type}

  # ---------------------------------------------------------------------------
  # Templates
  # ---------------------------------------------------------------------------

  @doc """
  A template tensor: `shape` and `type` without data.

  ## Options

    * `:names` - only `nil` names are accepted (Emily has no named axes)

  ## Examples

      iex> t = Emily.Tensor.template({2, 3}, :f32)
      #Emily.Tensor<
        f32[2][3]
        template (no data)
      >
      iex> Emily.Tensor.shape(t)
      {2, 3}
      iex> Emily.Tensor.add(t, 1)
      ** (ArgumentError) add: argument left is a template tensor (a shape and a type without data): a template cannot be computed with or read

  """
  @spec template(tuple(), term(), keyword()) :: Emily.Tensor.t()
  def template(shape, type, opts \\ []) do
    opts = Core.options!(opts, names: nil)

    unless is_tuple(shape) and Enum.all?(Tuple.to_list(shape), &(is_integer(&1) and &1 >= 0)) do
      raise ArgumentError,
            "template/3 expects a shape (a tuple of non-negative integers), got: #{inspect(shape)}"
    end

    if opts[:names] != nil and Enum.any?(opts[:names], &(&1 != nil)) do
      raise ArgumentError, "template/3: Emily has no named axes, got: #{inspect(opts[:names])}"
    end

    %Emily.Tensor{ref: :template, shape: shape, type: Type.normalize!(type)}
  end

  @doc """
  The templates of the tensors of a container (a tensor, a number, or
  tuples and maps of them): same shapes and types, no data.

  ## Examples

      iex> Emily.Tensor.to_template(Emily.Tensor.tensor([[1, 2], [3, 4]]))
      #Emily.Tensor<
        s32[2][2]
        template (no data)
      >

      iex> {a, %{b: b}} = Emily.Tensor.to_template({1.0, %{b: Emily.Tensor.iota({3})}})
      iex> {Emily.Tensor.type(a), Emily.Tensor.shape(b)}
      {{:f, 32}, {3}}

  """
  @spec to_template(term()) :: term()
  def to_template(container) do
    Backend.map_tensors(container, "to_template", fn t ->
      %Emily.Tensor{ref: :template, shape: t.shape, type: t.type}
    end)
  end

  @doc false
  def template?(%Emily.Tensor{ref: :template}), do: true
  def template?(_), do: false

  # ---------------------------------------------------------------------------
  # Donation
  # ---------------------------------------------------------------------------

  @doc """
  Marks a tensor donatable, as `Nx.donatable/1`: its buffer may be reused
  for a result. Emily's engine already writes a result into an input's
  buffer whenever nothing else holds that input, so the mark only
  documents intent; it shows in `inspect` and `donatable?/1` tells it.

  ## Examples

      iex> t = Emily.Tensor.donatable(Emily.Tensor.tensor([1, 2]))
      #Emily.Tensor<
        s32[2] [donatable]
        [1, 2]
      >
      iex> Emily.Tensor.donatable?(t)
      true

  """
  @spec donatable(Emily.Tensor.t() | number()) :: Emily.Tensor.t()
  def donatable(tensor), do: %{Core.to_tensor(tensor) | donatable: true}

  @doc """
  Whether `donatable/1` marked the tensor.

  ## Examples

      iex> Emily.Tensor.donatable?(Emily.Tensor.tensor([1, 2]))
      false

  """
  @spec donatable?(Emily.Tensor.t() | number()) :: boolean()
  def donatable?(%Emily.Tensor{donatable: donatable}), do: donatable == true
  def donatable?(_other), do: false

  # ---------------------------------------------------------------------------
  # Host calls
  # ---------------------------------------------------------------------------

  @doc """
  Calls `fun` with `tensor_or_container` (and `static_argument` when
  given) and returns its result, which must match `output`: a tensor or
  template (or a container of them) of the same structure, shapes and
  types. A mismatch raises `RuntimeError`, as in Nx.

  In Nx this calls Elixir from inside `defn`; Emily computes eagerly, so
  the call happens at once, on the actual values.

  ## Examples

      iex> x = Emily.Tensor.tensor([1, 2, 3])
      iex> out = Emily.Tensor.template({3}, :f32)
      iex> Emily.Tensor.runtime_call(out, x, [offset: 0.5], fn t, opts ->
      ...>   Emily.Tensor.add(Emily.Tensor.as_type(t, :f32), opts[:offset])
      ...> end)
      #Emily.Tensor<
        f32[3]
        [1.5, 2.5, 3.5]
      >

      iex> Emily.Tensor.runtime_call(Emily.Tensor.template({2}, :s32), Emily.Tensor.tensor([1]), fn t -> t end)
      ** (RuntimeError) runtime_call: expected the function to match the output template s32[2], got: s32[1]

  """
  @spec runtime_call(term(), term(), term(), function()) :: term()
  def runtime_call(output, tensor_or_container, static_argument, fun) when is_function(fun, 2) do
    result = fun.(tensor_or_container, static_argument)
    check_output!(output, result, "runtime_call")
    result
  end

  def runtime_call(_output, _tensor_or_container, _static_argument, fun) do
    raise ArgumentError, "runtime_call/4 expects a function of 2 arguments, got: #{inspect(fun)}"
  end

  @doc """
  `runtime_call/4` without a static argument: `fun` takes one argument.

  ## Examples

      iex> x = Emily.Tensor.tensor([1.0, 4.0])
      iex> Emily.Tensor.runtime_call(x, x, &Emily.Tensor.sqrt/1) |> Emily.Tensor.to_list()
      [1.0, 2.0]

  """
  @spec runtime_call(term(), term(), function()) :: term()
  def runtime_call(output, tensor_or_container, fun) when is_function(fun, 1) do
    result = fun.(tensor_or_container)
    check_output!(output, result, "runtime_call")
    result
  end

  def runtime_call(_output, _tensor_or_container, fun) do
    raise ArgumentError, "runtime_call/3 expects a function of 1 argument, got: #{inspect(fun)}"
  end

  @doc """
  Runs `fun` on `data` for its side effect (logging, sending a message)
  and returns `data` unchanged, as `Nx.io_call/3`. The name labels the
  call; in Nx a `defn` option can replace named calls, which eager Emily
  has no use for. `io_call(data, name)` without a function does nothing.

  ## Examples

      iex> x = Emily.Tensor.tensor([1, 2])
      iex> Emily.Tensor.io_call(x, fn t -> send(self(), {:seen, Emily.Tensor.to_list(t)}) end)
      iex> receive do {:seen, list} -> list end
      [1, 2]

      iex> Emily.Tensor.io_call(Emily.Tensor.tensor(3), :log, fn _ -> :ignored end) |> Emily.Tensor.to_number()
      3

  """
  @spec io_call(term(), atom() | (term() -> term())) :: term()
  def io_call(data, fun) when is_function(fun, 1) do
    fun.(data)
    data
  end

  def io_call(data, name) when is_atom(name), do: data

  def io_call(_data, other) do
    raise ArgumentError,
          "io_call/2 expects a name (an atom) or a function of 1 argument, got: #{inspect(other)}"
  end

  @doc "`io_call/2` with a name for the call. See `io_call/2`."
  @spec io_call(term(), atom(), (term() -> term())) :: term()
  def io_call(data, name, fun) when is_atom(name) and is_function(fun, 1) do
    fun.(data)
    data
  end

  def io_call(_data, name, fun) do
    raise ArgumentError,
          "io_call/3 expects a name (an atom) and a function of 1 argument, got: " <>
            "#{inspect(name)} and #{inspect(fun)}"
  end

  @doc """
  Runs a block: `apply(default_fun, [struct | args])`, the block's default
  implementation (Emily has no specialised blocks), and checks the result
  against `output_template` as `runtime_call/4` does.

  ## Examples

      iex> x = Emily.Tensor.tensor([1, -2])
      iex> Emily.Tensor.block(%{kind: :double}, [x], Emily.Tensor.template({2}, :s32), fn _block, t ->
      ...>   Emily.Tensor.multiply(t, 2)
      ...> end)
      #Emily.Tensor<
        s32[2]
        [2, -4]
      >

  """
  @spec block(term(), list(), term(), function()) :: term()
  def block(struct, args, output_template, default_fun)
      when is_list(args) and is_function(default_fun, length(args) + 1) do
    result = apply(default_fun, [struct | args])
    check_output!(output_template, result, "block")
    result
  end

  def block(_struct, args, _output_template, default_fun) do
    raise ArgumentError,
          "block/4 expects a list of arguments and a function taking the block struct and " <>
            "each argument, got: #{inspect(args)} and #{inspect(default_fun)}"
  end

  # The result must have the template's structure and each tensor its
  # shape and type.
  defp check_output!(template, result, function) do
    unless matches?(template, result) do
      raise RuntimeError,
            "#{function}: expected the function to match the output template " <>
              "#{describe(template)}, got: #{describe(result)}"
    end
  end

  defp matches?(template, result) when is_tuple(template) and is_tuple(result) do
    tuple_size(template) == tuple_size(result) and
      Enum.all?(Enum.zip(Tuple.to_list(template), Tuple.to_list(result)), fn {t, r} ->
        matches?(t, r)
      end)
  end

  defp matches?(template, result)
       when is_map(template) and not is_struct(template) and is_map(result) and
              not is_struct(result) do
    Map.keys(template) == Map.keys(result) and
      Enum.all?(template, fn {k, t} -> matches?(t, Map.fetch!(result, k)) end)
  end

  defp matches?(template, result) do
    case {leaf(template), leaf(result)} do
      {{:ok, shape, type}, {:ok, shape, type}} -> true
      _ -> false
    end
  end

  defp leaf(%Emily.Tensor{shape: shape, type: type}), do: {:ok, shape, type}

  defp leaf(x) when is_number(x) or is_struct(x, Emily.Complex),
    do: {:ok, {}, Type.infer(x)}

  defp leaf(_other), do: :error

  defp describe(x) when is_tuple(x),
    do: "{" <> Enum.map_join(Tuple.to_list(x), ", ", &describe/1) <> "}"

  defp describe(x) when is_map(x) and not is_struct(x),
    do: "%{" <> Enum.map_join(x, ", ", fn {k, v} -> "#{inspect(k)} => #{describe(v)}" end) <> "}"

  defp describe(x) do
    case leaf(x) do
      {:ok, shape, type} ->
        Type.to_string(type) <> Enum.map_join(Tuple.to_list(shape), &"[#{&1}]")

      :error ->
        inspect(x)
    end
  end
end
