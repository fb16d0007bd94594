package com.microsoft.CNTK;

/** CNTK's DoubleVectorVector (std::vector<std::vector<double>>): sequences of data. */
public class DoubleVectorVector extends ObjectVector<DoubleVector> {}
