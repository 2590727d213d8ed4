// epsilon, under the wrong name
