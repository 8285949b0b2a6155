if Code.ensure_loaded?(Bumblebee) do
  defmodule Emily.Bumblebee.FastKernels.Attention do
    @moduledoc false
    # Bumblebee's attention pair - `attention_weights_impl/7` (scores,
    # masks, softmax, head mask) feeding `attention_output_impl/3` (weights
    # times values) - as one `Emily.Fast` scaled dot-product attention.
    #
    # The masks become what the stock layer adds to the scores: 0 where the
    # key mask, the causal limit and the window allow a key (or the
    # relative bias, where there is one) and the type's most negative
    # finite value elsewhere, so that even a row with no allowed key
    # averages as the stock softmax does. The kernel's causal flag, which
    # aligns the queries to the end of the keys, is used when that is the
    # same thing: no cache offset, as many queries as keys, and no other
    # mask. The head mask scales each head's output (it scales the
    # weights, which sum into it linearly). Attention dropout only acts in
    # training: there the rewritten layer returns the stock layers' result.

    @doc false
    # {:ok, input ids, options} for the output node of a stock attention
    # pair (its weights node's inputs then the values), nil otherwise. The
    # options say whether the weights pass through dropout (:dropout): that
    # only acts in training, when the rewritten layer returns the stock
    # result.
    def plan(output_node, nodes) do
      with %{op_name: :custom, op: op, parent: [weights_id, value_id]} <- output_node,
           true <- bumblebee_fun?(op, :attention_output_impl),
           {:ok, weights, dropout} <- weights_node(nodes, weights_id, false),
           [_q, _k, _key_mask, _head_mask, _bias, _offset] = parents <- weights.parent do
        opts = Keyword.take(weights.opts, [:causal, :window_size, :scale])
        {:ok, parents ++ [value_id], [dropout: dropout] ++ opts}
      else
        _ -> nil
      end
    end

    # The weights node under the output node, through Axon's dropout.
    defp weights_node(nodes, id, dropout) do
      case nodes[id] do
        %{op_name: :dropout, opts: opts, parent: [parent]} ->
          weights_node(nodes, parent, dropout or (opts[:rate] || 0.0) > 0)

        %{op_name: :custom, op: op} = node ->
          if bumblebee_fun?(op, :attention_weights_impl), do: {:ok, node, dropout}, else: :error

        _ ->
          :error
      end
    end

    @doc false
    def bumblebee_fun?(op, name) when is_function(op) do
      Function.info(op, :module) == {:module, Bumblebee.Layers} and
        Function.info(op, :name) == {:name, name}
    end

    def bumblebee_fun?(_op, _name), do: false

    @doc false
    # The replacement layer on the weights node's inputs and the values;
    # with dropout, the stock output (`stock`) too, for training.
    def layer([q, k, key_mask, head_mask, bias, offset, v], stock, name, opts) do
      layer_opts = [
        name: name,
        op_name: :scaled_dot_product_attention,
        causal: opts[:causal] || false,
        window_size: opts[:window_size],
        scale: opts[:scale]
      ]

      inputs = [q, k, v, key_mask, head_mask, bias, offset]

      if opts[:dropout],
        do: Axon.layer(&__MODULE__.attention_or_stock_impl/9, inputs ++ [stock], layer_opts),
        else: Axon.layer(&__MODULE__.attention_impl/8, inputs, layer_opts)
    end

    @doc false
    # Attention whose weights go through dropout: the stock layers' result in
    # training (dropout acts), the fused kernel in inference (it does not).
    # Only the result returned is computed.
    def attention_or_stock_impl(query, key, value, key_mask, head_mask, bias, offset, stock, opts) do
      if opts[:mode] == :train,
        do: stock,
        else: attention_impl(query, key, value, key_mask, head_mask, bias, offset, opts)
    end

    @doc false
    # query {b, lq, h, d}, key {b, lk, h, d}, value {b, lk, h, dv} ->
    # {b, lq, h, dv}, as attention_output_impl returns it.
    def attention_impl(query, key, value, key_mask, head_mask, bias, offset, opts) do
      [q, k, v] = Enum.map([query, key, value], &Nx.transpose(&1, axes: [0, 2, 1, 3]))
      type = Nx.type(query)
      lq = Nx.axis_size(q, 2)
      lk = Nx.axis_size(k, 2)
      scale = opts[:scale]
      sdpa_opts = if is_number(scale), do: [scale: scale], else: []

      out =
        case mask(key_mask, bias, offset, lq, lk, type, opts) do
          :causal ->
            Emily.Fast.scaled_dot_product_attention(q, k, v, [causal: true] ++ sdpa_opts)

          nil ->
            Emily.Fast.scaled_dot_product_attention(q, k, v, sdpa_opts)

          additive ->
            Emily.Fast.scaled_dot_product_attention_with_mask(q, k, v, additive, sdpa_opts)
        end

      out =
        case head_mask do
          %Axon.None{} -> out
          head_mask -> Nx.multiply(out, Nx.reshape(head_mask, {1, :auto, 1, 1}))
        end

      out |> Nx.as_type(type) |> Nx.transpose(axes: [0, 2, 1, 3])
    end

    # :causal (the kernel's flag), nil (nothing masked), or the additive mask
    # of the stock layer, broadcastable to {b, h, lq, lk}.
    defp mask(key_mask, bias, offset, lq, lk, type, opts) do
      causal = opts[:causal] == true
      window = opts[:window_size]
      none? = &match?(%Axon.None{}, &1)

      if causal and window == nil and lq == lk and none?.(offset) and none?.(key_mask) and
           none?.(bias) do
        :causal
      else
        allowed = combine(key_mask(key_mask), position_mask(causal, window, offset, lq, lk))

        case {allowed, bias} do
          {nil, %Axon.None{}} ->
            nil

          {nil, bias} ->
            bias

          {allowed, %Axon.None{}} ->
            Nx.select(allowed, Nx.tensor(0.0, type: type), Nx.Constants.min_finite(type))

          {allowed, bias} ->
            shape = broadcast_shape(allowed, bias)
            Nx.select(Nx.broadcast(allowed, shape), bias, Nx.Constants.min_finite(type))
        end
      end
    end

    defp key_mask(%Axon.None{}), do: nil

    defp key_mask(mask) do
      mask = Nx.not_equal(mask, 0)

      case Nx.rank(mask) do
        2 -> mask |> Nx.new_axis(1) |> Nx.new_axis(1)
        4 -> mask
      end
    end

    # {1, 1, lq, lk}: query i (at position i + offset) may see key j.
    defp position_mask(false, nil, _offset, _lq, _lk), do: nil

    defp position_mask(causal, window, offset, lq, lk) do
      offset = if match?(%Axon.None{}, offset), do: 0, else: offset
      diff = Nx.subtract(Nx.add(Nx.iota({lq, 1}), offset), Nx.iota({1, lk}))

      allowed =
        case {causal, window} do
          {true, nil} ->
            Nx.greater_equal(diff, 0)

          {true, {left, _right}} ->
            Nx.logical_and(Nx.less_equal(diff, left), Nx.greater_equal(diff, 0))

          {false, {left, right}} ->
            Nx.logical_and(Nx.less_equal(diff, left), Nx.greater_equal(diff, -right))
        end

      allowed |> Nx.new_axis(0) |> Nx.new_axis(0)
    end

    defp combine(nil, b), do: b
    defp combine(a, nil), do: a
    defp combine(a, b), do: Nx.logical_and(a, b)

    defp broadcast_shape(a, b) do
      Enum.zip_with(Tuple.to_list(Nx.shape(a)), Tuple.to_list(Nx.shape(b)), &max/2)
      |> List.to_tuple()
    end
  end
end
