defmodule EmilyTest.Numpy do
  @moduledoc false
  # The numpy oracle for ExUnit: runs a Python snippet with numpy (Debian's
  # /usr/bin/python3) over named float64 (or complex128) inputs and returns
  # each output as {shape_tuple, flat_list}. Batch many cases into one call:
  # starting Python costs ~0.1 s.
  #
  #     EmilyTest.Numpy.run("out['y'] = np.exp(x)", x: {[1.0, 2.0], {2}})
  #     #=> %{"y" => {{2}, [2.718281828459045, 7.38905609893065]}}
  #
  # Values may be floats or :nan/:infinity/:neg_infinity; outputs come back
  # the same way. Complex outputs come back as {re, im} tuples.

  @python "/usr/bin/python3"

  def available?, do: File.exists?(@python) and match?({_, 0}, System.cmd(@python, ["-c", "import numpy"], stderr_to_stdout: true))

  def run(code, inputs) do
    dir = Path.join(System.tmp_dir!(), "emily_np_#{System.unique_integer([:positive])}")
    File.mkdir_p!(dir)

    try do
      decls =
        for {name, {values, shape}} <- inputs do
          File.write!(Path.join(dir, "#{name}.bin"), for(v <- values, into: <<>>, do: f64(v)))
          dims = shape |> Tuple.to_list() |> Enum.map_join(",", &Integer.to_string/1)
          "#{name} = np.fromfile(d + '/#{name}.bin', dtype=np.float64).reshape((#{dims}#{if tuple_size(shape) == 1, do: ",", else: ""}))"
        end

      script = """
      import numpy as np, sys, json
      np.seterr(all='ignore')
      d = sys.argv[1]
      #{Enum.join(decls, "\n")}
      out = {}
      #{code}
      meta = {}
      for k, v in out.items():
          v = np.asarray(v)
          kind = 'c' if np.iscomplexobj(v) else 'f'
          v = v.astype(np.complex128 if kind == 'c' else np.float64)
          v.tofile(d + '/out_' + k + '.bin')
          meta[k] = [list(v.shape), kind]
      print(json.dumps(meta))
      """

      {text, 0} = System.cmd(@python, ["-c", script, dir], stderr_to_stdout: true)
      meta = text |> String.split("\n", trim: true) |> List.last() |> parse_meta()

      Map.new(meta, fn {name, shape, kind} ->
        bin = File.read!(Path.join(dir, "out_#{name}.bin"))
        values = if kind == "c", do: complex(bin), else: for(<<v::binary-8 <- bin>>, do: from_f64(v))
        {name, {List.to_tuple(shape), values}}
      end)
    after
      File.rm_rf!(dir)
    end
  end

  # Tiny parser for {"name": [[dims], "k"], ...} (no JSON library here).
  defp parse_meta(text) do
    Regex.scan(~r/"(\w+)": \[\[([\d, ]*)\], "(\w)"\]/, text)
    |> Enum.map(fn [_, name, dims, kind] ->
      shape = dims |> String.split(",", trim: true) |> Enum.map(&(&1 |> String.trim() |> String.to_integer()))
      {name, shape, kind}
    end)
  end

  defp complex(bin), do: for(<<re::binary-8, im::binary-8 <- bin>>, do: {from_f64(re), from_f64(im)})

  def f64(:nan), do: <<0x7FF8000000000000::64-native>>
  def f64(:infinity), do: <<0x7FF0000000000000::64-native>>
  def f64(:neg_infinity), do: <<0xFFF0000000000000::64-native>>
  def f64(v), do: <<v * 1.0::float-64-native>>

  def from_f64(<<v::float-64-native>>), do: v

  def from_f64(<<bits::64-native>>) do
    cond do
      Bitwise.band(bits, 0x000FFFFFFFFFFFFF) != 0 -> :nan
      bits == 0x7FF0000000000000 -> :infinity
      true -> :neg_infinity
    end
  end
end
