"""Learners and their schedules (CNTK's cntk.learners).

A learning rate or momentum given as a number or a list becomes a schedule
(learning_parameter_schedule / momentum_schedule with the learner's epoch_size); the learner's
minibatch_size is the reference minibatch size of schedules made without one, and
use_mean_gradient=True selects CNTK's compatible mode (the gradient averaged over the
minibatch)."""
from loom import _loom
from loom._loom.learners import (IGNORE, Learner, TrainingParameterSchedule, UnitType,  # noqa: F401
                                 default_unit_gain_value, learning_parameter_schedule,
                                 learning_parameter_schedule_per_sample, learning_rate_schedule,
                                 minibatch_size_schedule, momentum_as_time_constant_schedule,
                                 momentum_schedule, momentum_schedule_per_sample,
                                 set_default_unit_gain_value, universal)

# The C++ learners' defaults (LearnerOptions), which the keyword arguments take.
_CPP = _loom.learners.LearnerOptions()


def training_parameter_schedule(schedule, unit=UnitType.minibatch, epoch_size=None):
    """Deprecated in CNTK 2.2: learning_rate_schedule with the unit defaulting to the
    minibatch."""
    return learning_rate_schedule(schedule, unit, epoch_size)


def _lr(lr, epoch_size):
    if isinstance(lr, TrainingParameterSchedule):
        return lr
    return learning_parameter_schedule(lr, epoch_size=epoch_size)


def _momentum(momentum, epoch_size):
    if isinstance(momentum, TrainingParameterSchedule):
        return momentum
    return momentum_schedule(momentum, epoch_size=epoch_size)


def _options(unit_gain=None, l1_regularization_weight=_CPP.l1_regularization_weight,
             l2_regularization_weight=_CPP.l2_regularization_weight,
             gaussian_noise_injection_std_dev=_CPP.gaussian_noise_injection_std_dev,
             gradient_clipping_threshold_per_sample=_CPP.gradient_clipping_threshold_per_sample,
             gradient_clipping_with_truncation=_CPP.gradient_clipping_with_truncation,
             use_mean_gradient=None, minibatch_size=None):
    if use_mean_gradient:
        minibatch_size = IGNORE
    return _loom.learners.LearnerOptions(
        default_unit_gain_value() if unit_gain is None else unit_gain, l1_regularization_weight,
        l2_regularization_weight, gaussian_noise_injection_std_dev,
        gradient_clipping_threshold_per_sample, gradient_clipping_with_truncation, minibatch_size)


def sgd(parameters, lr, l1_regularization_weight=_CPP.l1_regularization_weight,
        l2_regularization_weight=_CPP.l2_regularization_weight,
        gaussian_noise_injection_std_dev=_CPP.gaussian_noise_injection_std_dev,
        gradient_clipping_threshold_per_sample=_CPP.gradient_clipping_threshold_per_sample,
        gradient_clipping_with_truncation=_CPP.gradient_clipping_with_truncation,
        use_mean_gradient=None, minibatch_size=None, epoch_size=None):
    options = _options(None, l1_regularization_weight, l2_regularization_weight,
                       gaussian_noise_injection_std_dev, gradient_clipping_threshold_per_sample,
                       gradient_clipping_with_truncation, use_mean_gradient, minibatch_size)
    return _loom.learners.sgd(list(parameters), _lr(lr, epoch_size), options)


def momentum_sgd(parameters, lr, momentum, unit_gain=None,
                 l1_regularization_weight=_CPP.l1_regularization_weight,
                 l2_regularization_weight=_CPP.l2_regularization_weight,
                 gaussian_noise_injection_std_dev=_CPP.gaussian_noise_injection_std_dev,
                 gradient_clipping_threshold_per_sample=_CPP.gradient_clipping_threshold_per_sample,
                 gradient_clipping_with_truncation=_CPP.gradient_clipping_with_truncation,
                 use_mean_gradient=None, minibatch_size=None, epoch_size=None):
    options = _options(unit_gain, l1_regularization_weight, l2_regularization_weight,
                       gaussian_noise_injection_std_dev, gradient_clipping_threshold_per_sample,
                       gradient_clipping_with_truncation, use_mean_gradient, minibatch_size)
    return _loom.learners.momentum_sgd(list(parameters), _lr(lr, epoch_size),
                                       _momentum(momentum, epoch_size), options)


def nesterov(parameters, lr, momentum, unit_gain=None,
             l1_regularization_weight=_CPP.l1_regularization_weight,
             l2_regularization_weight=_CPP.l2_regularization_weight,
             gaussian_noise_injection_std_dev=_CPP.gaussian_noise_injection_std_dev,
             gradient_clipping_threshold_per_sample=_CPP.gradient_clipping_threshold_per_sample,
             gradient_clipping_with_truncation=_CPP.gradient_clipping_with_truncation,
             use_mean_gradient=None, minibatch_size=None, epoch_size=None):
    options = _options(unit_gain, l1_regularization_weight, l2_regularization_weight,
                       gaussian_noise_injection_std_dev, gradient_clipping_threshold_per_sample,
                       gradient_clipping_with_truncation, use_mean_gradient, minibatch_size)
    return _loom.learners.nesterov(list(parameters), _lr(lr, epoch_size),
                                   _momentum(momentum, epoch_size), options)


def adagrad(parameters, lr, need_ave_multiplier=_loom.learners.kNeedAveMultiplier,
            l1_regularization_weight=_CPP.l1_regularization_weight,
            l2_regularization_weight=_CPP.l2_regularization_weight,
            gaussian_noise_injection_std_dev=_CPP.gaussian_noise_injection_std_dev,
            gradient_clipping_threshold_per_sample=_CPP.gradient_clipping_threshold_per_sample,
            gradient_clipping_with_truncation=_CPP.gradient_clipping_with_truncation,
            use_mean_gradient=None, minibatch_size=None, epoch_size=None):
    options = _options(None, l1_regularization_weight, l2_regularization_weight,
                       gaussian_noise_injection_std_dev, gradient_clipping_threshold_per_sample,
                       gradient_clipping_with_truncation, use_mean_gradient, minibatch_size)
    return _loom.learners.adagrad(list(parameters), _lr(lr, epoch_size), need_ave_multiplier,
                                  options)


def adadelta(parameters, lr=None, rho=_loom.learners.kAdaDeltaRho,
             epsilon=_loom.learners.kAdaDeltaEpsilon,
             l1_regularization_weight=_CPP.l1_regularization_weight,
             l2_regularization_weight=_CPP.l2_regularization_weight,
             gaussian_noise_injection_std_dev=_CPP.gaussian_noise_injection_std_dev,
             gradient_clipping_threshold_per_sample=_CPP.gradient_clipping_threshold_per_sample,
             gradient_clipping_with_truncation=_CPP.gradient_clipping_with_truncation,
             use_mean_gradient=None, minibatch_size=None, epoch_size=None):
    options = _options(None, l1_regularization_weight, l2_regularization_weight,
                       gaussian_noise_injection_std_dev, gradient_clipping_threshold_per_sample,
                       gradient_clipping_with_truncation, use_mean_gradient, minibatch_size)
    if lr is None:
        lr = learning_parameter_schedule_per_sample(_loom.learners.kAdaDeltaLearningRate)
    return _loom.learners.adadelta(list(parameters), _lr(lr, epoch_size), rho, epsilon, options)


def adam(parameters, lr, momentum, unit_gain=None, variance_momentum=None,
         l1_regularization_weight=_CPP.l1_regularization_weight,
         l2_regularization_weight=_CPP.l2_regularization_weight,
         gaussian_noise_injection_std_dev=_CPP.gaussian_noise_injection_std_dev,
         gradient_clipping_threshold_per_sample=_CPP.gradient_clipping_threshold_per_sample,
         gradient_clipping_with_truncation=_CPP.gradient_clipping_with_truncation,
         use_mean_gradient=None, epsilon=_loom.learners.kAdamEpsilon, adamax=False,
         minibatch_size=None, epoch_size=None):
    options = _options(unit_gain, l1_regularization_weight, l2_regularization_weight,
                       gaussian_noise_injection_std_dev, gradient_clipping_threshold_per_sample,
                       gradient_clipping_with_truncation, use_mean_gradient, minibatch_size)
    if variance_momentum is None:
        variance_momentum = _loom.learners.default_variance_momentum_schedule()
    return _loom.learners.adam(list(parameters), _lr(lr, epoch_size),
                               _momentum(momentum, epoch_size),
                               _momentum(variance_momentum, epoch_size), epsilon, adamax, options)


def fsadagrad(parameters, lr, momentum, unit_gain=None, variance_momentum=None,
              l1_regularization_weight=_CPP.l1_regularization_weight,
              l2_regularization_weight=_CPP.l2_regularization_weight,
              gaussian_noise_injection_std_dev=_CPP.gaussian_noise_injection_std_dev,
              gradient_clipping_threshold_per_sample=_CPP.gradient_clipping_threshold_per_sample,
              gradient_clipping_with_truncation=_CPP.gradient_clipping_with_truncation,
              use_mean_gradient=None, minibatch_size=None, epoch_size=None):
    options = _options(unit_gain, l1_regularization_weight, l2_regularization_weight,
                       gaussian_noise_injection_std_dev, gradient_clipping_threshold_per_sample,
                       gradient_clipping_with_truncation, use_mean_gradient, minibatch_size)
    if variance_momentum is None:
        variance_momentum = _loom.learners.default_variance_momentum_schedule()
    return _loom.learners.fsadagrad(list(parameters), _lr(lr, epoch_size),
                                    _momentum(momentum, epoch_size),
                                    _momentum(variance_momentum, epoch_size), options)


def rmsprop(parameters, lr, gamma, inc, dec, max, min,
            need_ave_multiplier=_loom.learners.kNeedAveMultiplier,
            l1_regularization_weight=_CPP.l1_regularization_weight,
            l2_regularization_weight=_CPP.l2_regularization_weight,
            gaussian_noise_injection_std_dev=_CPP.gaussian_noise_injection_std_dev,
            gradient_clipping_threshold_per_sample=_CPP.gradient_clipping_threshold_per_sample,
            gradient_clipping_with_truncation=_CPP.gradient_clipping_with_truncation,
            use_mean_gradient=None, minibatch_size=None, epoch_size=None):
    options = _options(None, l1_regularization_weight, l2_regularization_weight,
                       gaussian_noise_injection_std_dev, gradient_clipping_threshold_per_sample,
                       gradient_clipping_with_truncation, use_mean_gradient, minibatch_size)
    return _loom.learners.rmsprop(list(parameters), _lr(lr, epoch_size), gamma, inc, dec, max, min,
                                  need_ave_multiplier, options)


class UserLearner(_loom.learners.UserLearner):
    """The base of a learner written in Python: override update(gradient_values,
    training_sample_count, sweep_end), which a Trainer calls with {Parameter: gradient} (an
    NDArrayView, or a numpy array with as_numpy=True) and returns True to go on."""

    def __init__(self, parameters, lr_schedule, as_numpy=True):
        super().__init__(list(parameters), _lr(lr_schedule, None), as_numpy)

    def parameters(self):
        """The parameters it updates (a method here, a property on built-in learners)."""
        return Learner.parameters.fget(self)
