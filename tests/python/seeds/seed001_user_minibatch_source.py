# Seed 001 ("Manual: How to create user minibatch sources") as a script. Changed from the seed
# only where it must be: the imports name loom (`import loom as cntk`); the random seed is fixed,
# as examples/user_minibatch_source_lstm.cpp fixes it, so that the C++ example's figures apply;
# and the seed's MyMultiWorkerDataSource, which fails in the seed (IndexError: it drops the
# sequence pending at the end of the file and reads past its data), reads whole sequences the way
# the C++ example does: it keeps the sequences of its worker and resumes from its file position.
# Its debugging prints are left out. Part 3 trains on the same data through the built-in CTF
# reader, the way the seed recommends first.
import io
import os
import tempfile

import numpy as np
import loom as C
from loom.io import UserMinibatchSource, StreamInformation, MinibatchData

C.cntk_py.set_fixed_random_seed(1)

# Our toy test data contains two sequences:
# 1) the first column is the sequence ID: e.g. 0 is the ID for sequecne 0; and 1 is the ID for sequence 1,
# 2) the second column is feature 'x' which is a sparse representation for the words in our training data, and
# 3) the third column is our lable 'y' which is the one-hot representation of label.
MBDATA = r'''0      |x 560:1        |y 1 0 0 0 0
0   |x 0:1
0   |x 0:1
1   |x 560:1        |y 0 1 0 0 0
1   |x 0:1
1   |x 0:1
1   |x 424:1
'''


class MyDataSource(UserMinibatchSource):
    def __init__(self, f_dim, l_dim):
        self.f_dim, self.l_dim = f_dim, l_dim

        self._prepare_data()

        #setting the state
        self.fsi = StreamInformation("features", 0, 'sparse', np.float32, (self.f_dim,))
        self.lsi = StreamInformation("labels", 1, 'dense', np.float32, (self.l_dim,))
        self.sequences = sorted(self.data)
        self.next_seq_idx = 0

        super(MyDataSource, self).__init__()

    def _prepare_data(self):
        """
        Parse the text and load the data into self.data.
        self.data is of the following structure:
           sequence id -> "features" -> list of features
        and
          sequence id -> "labels" -> label
        """
        # MBDATA fits into memory, so we will read it in all at once. Normally, however,
        # it does not, in which case we would need to keep track of the position in the
        # file until which we have already provided the data.
        # It follows the CNTKTextFormat specification
        #   sequence ID |feature1 data |feature2 data
        # where in this case feature1's data is encoded as one-hot and we will
        # convert to CSR, and feature2's data is a one-hot encoded as dense.

        self.data = {}
        for line in MBDATA.split('\n'):
            line = line.strip()
            if not line:
                continue
            seq_id, data = line.split('|', 1)
            data = data.split("|")
            seq_id = int(seq_id.strip())

            if seq_id not in self.data:
                self.data[seq_id] = {'features': []}

            # Processing features - expecting one per line.
            features = data[0].split(" ")
            vocab_idx = int(features[1].split(":")[0])
            self.data[seq_id]['features'].append(vocab_idx)

            # Process label, if exists
            if len(data) == 2:
                labels = np.asarray([data[1].split(" ")[1:]], dtype=np.float32)
                self.data[seq_id]['labels'] = labels

    def _prepare_nextbatch(self, num_samples):
        # Note that in this example we do not yet make use of number_of_workers or
        # worker_rank, which will limit the minibatch source to single GPU / single node
        # scenarios.
        features = []
        labels = []

        sweep_end = False

        f_sample_count = l_sample_count = 0

        while max(f_sample_count, l_sample_count) < num_samples:
            if self.next_seq_idx == len(self.sequences):
                sweep_end = True
                self.next_seq_idx = 0

            seq_id = self.sequences[self.sequences[self.next_seq_idx]]

            f_data = self.data[seq_id]['features']
            l_data = self.data[seq_id]['labels']
            if (features or labels) and max(f_sample_count+len(f_data), l_sample_count+len(l_data)) > num_samples:
                break
            f_sample_count += len(f_data)
            features.append(f_data)

            l_sample_count += len(l_data)
            labels.append(l_data)

            self.next_seq_idx += 1
        return features, f_sample_count, labels, l_sample_count, sweep_end

    def stream_infos(self):
        """
        Override the stream_infos method of the base class --- UserMinibatchSource --- to provide stream meta information.
        """
        return [self.fsi, self.lsi]

    def next_minibatch(self, num_samples, number_of_workers=1, worker_rank=0, device=None):
        """
        Override the next_minibatch method of the base class --- UserMinibatchSource --- to provide minibatch data.
        """
        # Note that in this example we do not yet make use of number_of_workers or
        # worker_rank, which will limit the minibatch source to single GPU / single node
        # scenarios.
        features, feature_sample_count, labels, label_sample_count, sweep_end = self._prepare_nextbatch(num_samples)
        num_seq = len(features)

        f_data = C.Value.one_hot(batch=features, num_classes=self.f_dim)
        l_data = C.Value(batch=np.asarray(labels, dtype=np.float32))

        result = {
                self.fsi: MinibatchData(f_data, num_seq, feature_sample_count, sweep_end),
                self.lsi: MinibatchData(l_data, num_seq, label_sample_count, sweep_end)
                }

        return result


print("Part 1: MyDataSource")
input_dim = 1000
num_output_classes = 5

# instantiating the user minibatch source
mbs = MyDataSource(input_dim, num_output_classes)
feature = C.sequence.input_variable(shape=(input_dim,))
label = C.input_variable(shape=(num_output_classes,))

# setting up the model
rnn = C.layers.Recurrence(C.layers.LSTM(20), go_backwards=False)(feature)
end = C.sequence.last(rnn)
z = C.layers.Dense(num_output_classes)(end)
ce = C.cross_entropy_with_softmax(z, label)
errs = C.classification_error(z, label)
learner = C.sgd(z.parameters, C.learning_rate_schedule(0.5, unit = C.UnitType.sample) )

# and train
trainer = C.Trainer(z, (ce, errs), [learner], [C.logging.ProgressPrinter(tag='Training', num_epochs=10)])
input_map = {
    feature: mbs.fsi,
    label: mbs.lsi
}

session = C.training_session(
    trainer = trainer,
    mb_source = mbs,
    model_inputs_to_streams = input_map,
    mb_size = 4,
    max_samples = 80,
    progress_frequency = 20
)
session.train()


print("Part 2: MyMultiWorkerDataSource")
# Our toy test data contains two sequences:
# 1) the first column is the sequence ID: e.g. 0 is the ID for sequecne 0; and 1 is the ID for sequence 1,
# 2) the second column is feature 'x' which is a sparse representation for the words in our training data, and
# 3) the third column is our lable 'y' which is the one-hot representation of label.
sample_data = r'''0      |x 560:1        |y 1 0 0 0 0
0   |x 0:1
0   |x 0:1
1   |x 560:1        |y 0 1 0 0 0
1   |x 0:1
1   |x 0:1
1   |x 424:1
2   |x 160:1        |y 0 0 1 0 0
2   |x 5:1
2   |x 6:1
3   |x 460:1        |y 0 0 0 1 0
3   |x 3:1
3   |x 3:1
3   |x 425:1
'''

class MyMultiWorkerDataSource(UserMinibatchSource):
    def __init__(self, file_io, f_dim, l_dim):
        self.f_dim, self.l_dim = f_dim, l_dim
        self.file_io = file_io

        #setting the state
        self.fsi = StreamInformation("features", 0, 'sparse', np.float32, (self.f_dim,))
        self.lsi = StreamInformation("labels", 1, 'dense', np.float32, (self.l_dim,))
        self.io_pos = self.file_io.tell()
        super(MyMultiWorkerDataSource, self).__init__()

    def _parse_line(self, line):
        res = {}
        seq_id, data = line.split('|', 1)
        seq_id = int(seq_id.strip())
        data = data.split("|")
        # Processing features - expecting one per line.
        features = data[0].split(" ")
        vocab_idx = int(features[1].split(":")[0])
        features = vocab_idx
        # Process label, if exists
        if len(data) == 2:
            labels = np.asarray([data[1].split(" ")[1:]], dtype=np.float32)
        else:
            labels = None
        return seq_id, features, labels

    def _read_sequence(self):
        # (Loom) The sequence starting at self.io_pos (at the end of the file: the first one, and
        # wrapped is True); self.io_pos moves to the line after it.
        self.file_io.seek(self.io_pos)
        wrapped = self.file_io.readline() == ""
        if wrapped:
            self.io_pos = 0
        self.file_io.seek(self.io_pos)
        seq_id, feature_data, label_data = -1, [], None
        while True:
            self.io_pos = self.file_io.tell()
            line = self.file_io.readline()
            if line == "":
                break
            next_seq_id, next_feature, next_label = self._parse_line(line)
            if seq_id != -1 and next_seq_id != seq_id:
                break
            seq_id = next_seq_id
            feature_data.append(next_feature)
            if next_label is not None:
                label_data = next_label
        return seq_id, feature_data, label_data, wrapped

    def _prepare_nextbatch(self, num_samples, number_of_workers, worker_rank):
        features = []
        labels = []

        sweep_end = False

        f_sample_count = l_sample_count = 0

        while max(f_sample_count, l_sample_count) < num_samples:
            start = self.io_pos
            seq_id, feature_data, label_data, wrapped = self._read_sequence()
            if f_sample_count and max(f_sample_count+len(feature_data), l_sample_count+len(label_data)) > num_samples:
                # too many samples: reserve it for the next batch
                self.io_pos = start
                break
            sweep_end = sweep_end or wrapped
            f_sample_count += len(feature_data)
            l_sample_count += len(label_data)
            # Based on the worker rank, determines whether to add this data in the batch:
            # If the sequences doesn't belong to this worker, skip it
            if (seq_id % number_of_workers) == worker_rank:
                features.append(feature_data)
                labels.append(label_data)

        return features, labels, sweep_end

    def stream_infos(self):
        """
        Override the stream_infos method of the base class --- UserMinibatchSource --- to provide stream meta information.
        """
        return [self.fsi, self.lsi]

    def next_minibatch(self, num_samples, number_of_workers, worker_rank, device=None):
        """
        Override the next_minibatch method of the base class --- UserMinibatchSource --- to provide minibatch data.
        """
        features, labels, sweep_end = self._prepare_nextbatch(num_samples, number_of_workers,
                                                              worker_rank)
        num_seq = len(features)
        feature_sample_count = sum(len(f) for f in features)
        label_sample_count = sum(len(l) for l in labels)

        f_data = C.Value.one_hot(batch=features, num_classes=self.f_dim)
        # (Loom) reshaped, so that a worker without sequences passes an empty batch of labels
        l_data = C.Value(batch=np.asarray(labels, dtype=np.float32).reshape(num_seq, 1, self.l_dim))

        result = {
                self.fsi: MinibatchData(f_data, num_seq, feature_sample_count, sweep_end),
                self.lsi: MinibatchData(l_data, num_seq, label_sample_count, sweep_end)
                }

        return result

    # (Loom) The position in the file, so that a session resumes where its checkpoint was taken.
    def get_checkpoint_state(self):
        return {'io_pos': self.io_pos}

    def restore_from_checkpoint(self, state):
        self.io_pos = state['io_pos']


input_dim = 1000
num_output_classes = 5

# instantiating the user minibatch source
file_io =  io.StringIO(sample_data) #mock the string data as file io for self-contained explanation purpurse
mbs = MyMultiWorkerDataSource(file_io, input_dim, num_output_classes)
feature = C.sequence.input_variable(shape=(input_dim,))
label = C.input_variable(shape=(num_output_classes,))

# setting up the model
rnn = C.layers.Recurrence(C.layers.LSTM(20), go_backwards=False)(feature)
end = C.sequence.last(rnn)
z = C.layers.Dense(num_output_classes)(end)
loss = C.cross_entropy_with_softmax(z, label)
errs = C.classification_error(z, label)
local_learner = C.sgd(z.parameters, C.learning_rate_schedule(0.5, unit = C.UnitType.sample) )
dist_learner = C.distributed.data_parallel_distributed_learner(local_learner)
# and train
trainer = C.Trainer(z, (loss, errs), [dist_learner], [C.logging.ProgressPrinter(tag='Training', num_epochs=10)])
input_map = {
    feature: mbs.fsi,
    label: mbs.lsi
}
session = C.training_session(
    trainer = trainer,
    mb_source = mbs,
    model_inputs_to_streams = input_map,
    mb_size = 7,
    max_samples = 80,
    progress_frequency = 20
)
session.train()


print("Part 3: the built-in CTF reader")
# (Loom) The seed's first choice: the same data in CNTK's text format, read by the built-in
# reader in order.
ctf_file = os.path.join(tempfile.mkdtemp(), 'mbdata.ctf')
with open(ctf_file, 'w') as f:
    f.write(MBDATA)
reader = C.io.MinibatchSource(C.io.CTFDeserializer(ctf_file, C.io.StreamDefs(
    features=C.io.StreamDef(field='x', shape=input_dim, is_sparse=True),
    labels=C.io.StreamDef(field='y', shape=num_output_classes))), randomize=False)
feature = C.sequence.input_variable(shape=(input_dim,))
label = C.input_variable(shape=(num_output_classes,))
rnn = C.layers.Recurrence(C.layers.LSTM(20), go_backwards=False)(feature)
end = C.sequence.last(rnn)
z = C.layers.Dense(num_output_classes)(end)
ce = C.cross_entropy_with_softmax(z, label)
errs = C.classification_error(z, label)
learner = C.sgd(z.parameters, C.learning_rate_schedule(0.5, unit = C.UnitType.sample) )
trainer = C.Trainer(z, (ce, errs), [learner], [C.logging.ProgressPrinter(tag='Training', num_epochs=10)])
session = C.training_session(
    trainer = trainer,
    mb_source = reader,
    model_inputs_to_streams = {feature: reader.streams.features, label: reader.streams.labels},
    mb_size = 4,
    max_samples = 80,
    progress_frequency = 20
)
session.train()

C.distributed.Communicator.finalize()
