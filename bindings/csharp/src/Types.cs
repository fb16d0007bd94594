// CNTK's small value types with their managed names: devices, data types, cloning methods.
using System;
using System.Collections.Generic;

namespace CNTK
{
    // The values are CNTK's (and loom_c.h's LOOM_FLOAT32 / LOOM_FLOAT64).
    public enum DataType { Unknown = 0, Float = 1, Double = 2 }

    public enum DeviceKind { CPU, GPU }

    // Loom evaluates without changing parameters, so the three give the same results; each
    // clone shares the one copy of the parameters.
    public enum ParameterCloningMethod { Share, Clone, Freeze }

    // The format is found from the file's content; the argument is kept for CNTK's signature.
    public enum ModelFormat { CNTKv2, ONNX }

    public enum VariableKind { Input, Output }

    // Loom computes on the CPU: the CPU device is the only one.
    public sealed class DeviceDescriptor
    {
        private static readonly DeviceDescriptor cpu = new DeviceDescriptor();

        private DeviceDescriptor() { }

        public static DeviceDescriptor CPUDevice { get { return cpu; } }
        public static DeviceDescriptor UseDefaultDevice() { return cpu; }
        public static IList<DeviceDescriptor> AllDevices() { return new List<DeviceDescriptor> { cpu }; }

        public static DeviceDescriptor GPUDevice(int deviceId)
        {
            throw new NotSupportedException(string.Format(
                "GPU device {0}: Loom evaluates on the CPU only; use DeviceDescriptor.CPUDevice", deviceId));
        }

        public int Id { get { return 0; } }
        public DeviceKind Type { get { return DeviceKind.CPU; } }
        public override string ToString() { return "CPU"; }
    }

    internal static class DataTypes
    {
        internal static DataType Of<T>()
        {
            if (typeof(T) == typeof(float)) return DataType.Float;
            if (typeof(T) == typeof(double)) return DataType.Double;
            throw new ArgumentException("The data type " + typeof(T) +
                                        " is not supported: use float or double");
        }
    }
}
