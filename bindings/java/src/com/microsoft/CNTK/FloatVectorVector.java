package com.microsoft.CNTK;

/** CNTK's FloatVectorVector (std::vector<std::vector<float>>): sequences of data. */
public class FloatVectorVector extends ObjectVector<FloatVector> {}
