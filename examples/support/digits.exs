# scikit-learn's 8x8 handwritten digits (1,797 images, 10 classes), read from
# the CSV file that ships inside scikit-learn (python3-sklearn; installed by
# scripts/setup.sh), as Nx tensors on the default backend.
#
#   Digits.load() :: %{train: {x, labels}, test: {x, labels}}
#
# x is f32 {n, 64} standardised with the training set's statistics, labels
# s32 {n}. The split is a fixed shuffle: 80% train, 20% test.
defmodule Digits do
  def load do
    rows = read_rows()
    :rand.seed(:exsss, {2026, 11, 29})
    rows = Enum.shuffle(rows)
    {test_rows, train_rows} = Enum.split(rows, div(length(rows), 5))
    {x_train, y_train} = split_xy(train_rows)
    {x_test, y_test} = split_xy(test_rows)

    # Constant pixels (always 0 in the corners) keep a unit scale.
    mean = Nx.mean(x_train, axes: [0])
    std = x_train |> Nx.standard_deviation(axes: [0]) |> Nx.max(1.0e-3)
    standardise = fn x -> x |> Nx.subtract(mean) |> Nx.divide(std) end
    %{train: {standardise.(x_train), y_train}, test: {standardise.(x_test), y_test}}
  end

  defp split_xy(rows) do
    x = rows |> Enum.map(&Enum.take(&1, 64)) |> Nx.tensor(type: :f32)
    labels = rows |> Enum.map(&trunc(List.last(&1))) |> Nx.tensor(type: :s32)
    {x, labels}
  end

  defp read_rows do
    data_file()
    |> File.read!()
    |> :zlib.gunzip()
    |> String.split("\n", trim: true)
    |> Enum.map(fn line -> line |> String.split(",") |> Enum.map(&parse_number/1) end)
  end

  # The file's numbers are written as "0" or "0.0".
  defp parse_number(text) do
    case Float.parse(text) do
      {x, ""} -> x
      _ -> raise "unexpected value in the digits file: #{inspect(text)}"
    end
  end

  # $DIGITS_CSV_GZ (a copy of the file, e.g. on a machine without
  # scikit-learn), else Debian's python3 (python3-sklearn), else the first
  # python3 on the PATH that has scikit-learn.
  defp data_file do
    System.get_env("DIGITS_CSV_GZ") || sklearn_data_file()
  end

  defp sklearn_data_file do
    script =
      "import os, sklearn; print(os.path.join(os.path.dirname(sklearn.__file__), " <>
        "'datasets', 'data', 'digits.csv.gz'))"

    ["/usr/bin/python3", System.find_executable("python3")]
    |> Enum.filter(&(&1 && File.exists?(&1)))
    |> Enum.find_value(fn python ->
      case System.cmd(python, ["-c", script], stderr_to_stdout: true) do
        {path, 0} -> String.trim(path)
        _ -> nil
      end
    end) || raise "scikit-learn's digits data not found: install python3-sklearn"
  end
end
