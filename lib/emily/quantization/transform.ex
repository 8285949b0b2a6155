defmodule Emily.Quantization.Transform do
  @moduledoc """
  Quantizes the dense layers of an Axon model: the model's `:dense` layers
  become `Emily.Quantization.Layers.quantized_dense/4` layers (same names,
  same parameters) and their kernels in the model state become
  `Emily.QuantizedWeight`s. Inference only: the quantized layers are frozen.

      {qmodel, qstate} = Emily.Quantization.Transform.quantize(model, state, bits: 4)
      predict = Axon.build(qmodel, compiler: Emily.Compiler) |> elem(1)
      predict.(qstate, input)

  ## Options

    * `:bits` — 2, 3, 4, 5, 6 or 8 (default 4)
    * `:group_size` — 32, 64 or 128 (default 128); a layer whose input size
      is not a multiple of it is left dense
    * `:transpose` — `true` (default): the kernel is stored `[out, in]` (the
      MLX layout, read by the kernel's fast matrix-vector path); `false`:
      `[in, out]`, quantized along `out`
    * `:mode` — `"affine"`
    * `:except` — names of dense layers to leave as they are (default `[]`)

  Axon is needed at run time (it is the caller's dependency).
  """

  alias Emily.Quantization.Layers
  alias Emily.QuantizedWeight

  @compile {:no_warn_undefined, [Axon, Axon.ModelState]}

  @defaults [bits: 4, group_size: 128, transpose: true, mode: "affine", except: []]

  @doc "Quantizes the model and its state: `{quantized_model, quantized_state}`."
  def quantize(model, model_state, opts \\ []) do
    opts = Keyword.validate!(opts, @defaults)
    {quantize_dense_layers(model, opts), quantize_model_state(model, model_state, opts)}
  end

  @doc """
  Rewrites the model's dense layers (but those in `:except`) to layers that
  run `Emily.Quantization.Layers.quantized_dense/4` when their kernel is an
  `Emily.QuantizedWeight`, keeping their names and parameters. Initialising
  the rewritten model gives dense kernels (Axon initialises inside `defn`,
  where quantizing is not offered) on which the layers multiply densely;
  `quantize_model_state/3` then quantizes them.
  """
  def quantize_dense_layers(model, opts \\ []) do
    opts = Keyword.validate!(opts, @defaults)
    names = layer_names(model)

    Axon.rewrite_nodes(model, fn
      %{op: :dense, id: id, meta: meta, name: name_fn} ->
        if Map.fetch!(names, id) in opts[:except] do
          :skip
        else
          fn [x], _output -> quantized_dense(x, meta[:units], meta[:use_bias], name_fn, opts) end
        end

      _ ->
        :skip
    end)
  end

  @doc """
  The model state with the kernels of the model's dense layers (but those
  in `:except`) replaced by `Emily.QuantizedWeight`s, and those layers
  frozen.
  """
  def quantize_model_state(model, model_state, opts \\ []) do
    opts = Keyword.validate!(opts, @defaults)

    dense =
      for {name, :dense} <- Axon.properties(model),
          name not in opts[:except],
          quantizable?(get_in(model_state.data, [name, "kernel"]), opts),
          into: MapSet.new(),
          do: name

    # Frozen while the kernels are still tensors: Axon.ModelState walks its
    # leaves as tensors (or its own QTensor).
    state = Axon.ModelState.freeze(model_state, fn [name | _] -> MapSet.member?(dense, name) end)

    Enum.reduce(dense, state, fn name, state ->
      update_in(state, [Access.key!(:data), name, "kernel"], &quantize_kernel(&1, opts))
    end)
  end

  # ---- helpers ----------------------------------------------------------------

  defp quantizable?(%Nx.Tensor{shape: {inp, out}, type: type}, opts) do
    len = if opts[:transpose], do: inp, else: out
    type in [{:f, 32}, {:f, 16}, {:bf, 16}] and rem(len, opts[:group_size]) == 0
  end

  defp quantizable?(_, _), do: false

  # An Axon dense kernel is [in, out].
  defp quantize_kernel(kernel, opts) do
    w = if opts[:transpose], do: Nx.transpose(kernel), else: kernel

    QuantizedWeight.from_dense(w,
      bits: opts[:bits],
      group_size: opts[:group_size],
      transpose: opts[:transpose],
      mode: opts[:mode]
    )
  end

  # A dense layer whose kernel parameter is a QuantizedWeight once
  # quantize_model_state/3 ran; a tensor kernel (freshly initialised, or one
  # the options cannot quantize: its length is not a multiple of the group
  # size) is multiplied densely.
  defp quantized_dense(x, units, use_bias, name_fn, _opts) do
    kernel =
      Axon.param("kernel", fn shape -> {elem(shape, tuple_size(shape) - 1), units} end,
        initializer: :glorot_uniform
      )

    {inputs, op} =
      if use_bias do
        bias = Axon.param("bias", fn _ -> {units} end, initializer: :zeros)
        {[x, kernel, bias], &dense_op/4}
      else
        {[x, kernel], &dense_op/3}
      end

    Axon.layer(op, inputs,
      name: name_fn,
      meta: %{units: units, use_bias: use_bias},
      op_name: :dense
    )
  end

  @doc false
  def dense_op(x, kernel, bias \\ 0, opts \\ [])

  def dense_op(x, %QuantizedWeight{} = kernel, bias, opts),
    do: Layers.quantized_dense(x, kernel, bias, opts)

  def dense_op(x, %Nx.Tensor{} = kernel, bias, _opts) when not is_list(bias),
    do: Nx.add(Nx.dot(x, [Nx.rank(x) - 1], kernel, [0]), bias)

  def dense_op(x, %Nx.Tensor{} = kernel, _opts, _), do: Nx.dot(x, [Nx.rank(x) - 1], kernel, [0])

  # Layer names by node id, as Axon.properties/1 assigns them.
  defp layer_names(%Axon{output: id, nodes: nodes}) do
    {names, _} = name_nodes(id, nodes, {%{}, %{}})
    names
  end

  defp name_nodes(id, nodes, {names, _counts} = acc) do
    if Map.has_key?(names, id) do
      acc
    else
      %{parent: parents, name: name_fn, op_name: op_name} = nodes[id]
      {names, counts} = Enum.reduce(parents, acc, &name_nodes(&1, nodes, &2))
      name = name_fn.(op_name, counts)
      {Map.put(names, id, name), Map.update(counts, op_name, 1, &(&1 + 1))}
    end
  end
end
